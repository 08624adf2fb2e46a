"""Import and export (ownloop/transfer/)."""

from __future__ import annotations

import sys

import click

from ownloop.cli.common import echo_lines, friendly, run_option, store_of, where_option

__all__ = ["COMMANDS", "export_command", "import_command"]


@click.command("import")
@click.argument("directory", type=click.Path())
@click.option(
    "--agent",
    help="Whose steps.jsonl form: uitars, molmoweb, fara7b or opencua (its "
    "parser fills the parsed actions when it loads); default: told from the lines.",
)
@run_option(
    "The run to import into (default: import-<DIR name>, "
    "atif-<name>); folders already in it are skipped."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["harness", "atif", "osworld"]),
    default="harness",
    help="Harness result folders, ATIF trajectories (a .json file or a folder of them), or "
    "an OSWorld result_dir (one run per action space, observation type and model).",
)
@click.option("--model", help="osworld: import only this model's folders.")
@click.option(
    "--tasks-dir",
    type=click.Path(file_okay=False),
    help="osworld: OSWorld's evaluation_examples, to attach each example's task file.",
)
@click.pass_context
@friendly
def import_command(
    ctx: click.Context,
    directory: str,
    agent: str | None,
    run_id: str | None,
    fmt: str,
    model: str | None,
    tasks_dir: str | None,
) -> None:
    """Import result folders written by a plain harness (one per task), ATIF trajectories, or
    OSWorld's result folders.

    Example: ownloop import results/uitars-0611 --agent uitars --run uitars-0611
    """
    from ownloop.transfer import import_dir

    if fmt == "osworld":
        from ownloop.transfer.osworld_import import import_osworld

        found = import_osworld(
            store_of(ctx),
            directory,
            agent=agent,
            run_id=run_id,
            model=model,
            tasks_dir=tasks_dir,
            argv=tuple(sys.argv),
        )
        echo_lines(found.lines())
        return
    if fmt == "atif":
        from ownloop.transfer.atif_import import import_atif

        echo_lines(import_atif(store_of(ctx), directory, run_id, argv=tuple(sys.argv)).lines())
        return
    result = import_dir(store_of(ctx), directory, agent, run_id, argv=tuple(sys.argv))
    echo_lines(result.lines())
    for warning in result.warnings:
        click.echo(warning, err=True)


@click.command("export")
@run_option("The run (required for session-dir and osworld; the others: all runs when left out).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(
        ["session-dir", "parquet", "sft", "sft-parquet", "atif", "otlp", "osworld", "inspect"]
    ),
    default="session-dir",
    help="Harness folders, Parquet views, SFT records (JSONL or Parquet), ATIF "
    "trajectories, OTLP traces, OSWorld's result layout (traj.jsonl, result.txt), "
    "or Inspect .eval logs (one per run).",
)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder to write.")
@where_option(
    "sft, atif, otlp, inspect: an SQL condition over the sessions view "
    "(sft's default: passed and coalesce(counted, true))."
)
@click.option(
    "--agent-format",
    type=click.Choice(["native", "chat"]),
    default="chat",
    help="sft: the request as sent (native) or as chat messages.",
)
@click.option("--per-session", is_flag=True, help="sft: one record per session, not per step.")
@click.option(
    "--endpoint",
    help="otlp: send to this OTLP/HTTP collector (its base URL) instead "
    "of writing traces.jsonl; images and long texts still go under --out.",
)
@click.option(
    "--otlp-encoding",
    type=click.Choice(["protobuf", "json"]),
    default="protobuf",
    help="otlp --endpoint: post application/x-protobuf or OTLP/JSON.",
)
@click.pass_context
@friendly
def export_command(
    ctx: click.Context,
    run_id: str | None,
    fmt: str,
    out: str,
    where: str | None,
    agent_format: str,
    per_session: bool,
    endpoint: str | None,
    otlp_encoding: str,
) -> None:
    """Write runs as harness folders, Parquet views, SFT records, ATIF or OTLP traces.

    Example: ownloop export --run r1 --format sft --agent-format native --out sft/r1
    """
    from ownloop.transfer import export_run
    from ownloop.transfer.exporter import OtlpSink

    echo_lines(
        export_run(
            store_of(ctx, create=False),
            run_id,
            fmt,
            out,
            where=where,
            agent_format=agent_format,
            per_session=per_session,
            otlp=OtlpSink(endpoint, otlp_encoding),
        ).lines()
    )


COMMANDS = (import_command, export_command)
