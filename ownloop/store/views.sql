-- The index's named views: what researchers query. Every view is a plain SELECT over the tables
-- derived from the event Structs (one table per event kind, named by its tag). Documented column
-- by column in the README ("SQL views"). Nested values are JSON in msgspec's encoding, which
-- leaves out fields at their default: the views put those defaults back.
-- "Latest" means the last by time, then by stream and sequence number.

create view runs as
with started as (
    select run_id,
        min(time) as started_at,
        max(time) as last_started_at,
        count(*) as starts,
        arg_min(agent, time) as agent,
        arg_min(model, time) as model,
        arg_min(endpoint, time) as endpoint,
        arg_min(suite, time) as suite,
        arg_min(argv, time) as argv,
        arg_min(versions, time) as versions,
        arg_min(sampling, time) as sampling,
        arg_min(viewport, time) as viewport,
        arg_min(prompt_source, time) as prompt_source,
        arg_min(max_steps, time) as budget,
        arg_min(config_sha256, time) as config_sha256,
        arg_min(tasks_sha256, time) as tasks_sha256,
        arg_min(suite_version, time) as suite_version,
        arg_min(repeats, time) as repeats
    from run_started group by run_id
),
ended as (
    select run_id, max(time) as ended_at, arg_max(counts, time) as counts
    from run_ended group by run_id
),
counted as (
    select run_id, count(distinct session_id) as sessions from session_started group by run_id
),
budgets as (
    -- the step budgets the run's own sessions ran under (replays left out)
    select run_id, list(distinct budget order by budget) as budgets
    from session_started where budget is not null and parent_session_id is null group by run_id
)
select s.run_id, s.agent, s.model, s.endpoint, s.suite,
    s.started_at,
    -- a run resumed after its last RunEnded is running again (or crashed): no end yet
    case when e.ended_at >= s.last_started_at then e.ended_at end as ended_at,
    s.starts, coalesce(c.sessions, 0) as sessions, e.counts,
    s.argv, s.versions, s.sampling, s.viewport, s.prompt_source,
    s.budget, s.config_sha256, coalesce(b.budgets, []) as budgets, s.tasks_sha256,
    s.suite_version, coalesce(s.repeats, 1) as repeats
from started s
left join ended e on e.run_id = s.run_id
left join counted c on c.run_id = s.run_id
left join budgets b on b.run_id = s.run_id;

-- Each session's own facts, kept by every sync for the sessions its new events touched (the
-- refresh is SESSION_FACTS_REFRESH in schema.py): its first SessionStarted, last SessionEnded,
-- last grade not against a seal and last SessionCounted. Reading this table instead of ranking
-- those events again on every query keeps the sessions view cheap on a large store.
create table session_facts (session_id VARCHAR, run_id VARCHAR, task_id VARCHAR,
    agent VARCHAR, model VARCHAR, attempt BIGINT,
    status VARCHAR, agent_status VARCHAR, answer VARCHAR, steps BIGINT, seconds DOUBLE,
    score DOUBLE, passed BOOLEAN, grader VARCHAR,
    parent_session_id VARCHAR, replay_mode VARCHAR, fork_step BIGINT,
    started_at TIMESTAMP, ended_at TIMESTAMP,
    suite VARCHAR, prompt VARCHAR, start_url VARCHAR,
    parse_failures BIGINT, action_errors BIGINT, error VARCHAR,
    viewport JSON, budget BIGINT, repeat BIGINT, counted BOOLEAN);

-- One budget is min = max, not count(distinct) = 1 (the same under coalesce(..., false)): DuckDB
-- plans a distinct aggregate as a CTE read twice and then joins it after a query's own join, on
-- every row of that (a timing query's 200,000 calls at 10,000 sessions), not on the sessions.
create view sessions as
with run as (
    select run_id, arg_min(agent, time) as agent, arg_min(model, time) as model,
        arg_min(max_steps, time) as budget, min(max_steps) = max(max_steps) as one_declared
    from run_started group by run_id
),
run_budgets as (
    select run_id, min(budget) = max(budget) as one_budget
    from session_started where parent_session_id is null group by run_id
)
select f.session_id, f.run_id, f.task_id,
    coalesce(nullif(f.agent, ''), r.agent, '') as agent,
    coalesce(nullif(f.model, ''), r.model, '') as model,
    f.attempt,
    f.status, f.agent_status, f.answer, f.steps, f.seconds,
    f.score, f.passed, f.grader,
    f.parent_session_id, f.replay_mode, f.fork_step,
    f.started_at, f.ended_at,
    f.suite, f.prompt, f.start_url,
    f.parse_failures, f.action_errors, f.error,
    f.viewport,
    f.budget, f.repeat, f.counted,
    -- comparable: ran under its run's declared budget, and the run has that one budget only
    coalesce(f.budget = r.budget and r.one_declared and rb.one_budget, false) as comparable
from session_facts f
left join run r on r.run_id = f.run_id
left join run_budgets rb on rb.run_id = f.run_id;

-- A step is every (session, step) any of its kinds mentions (the full joins). The latest
-- screenshot and parse are picked by one arg_max each (not a window): the view plans and runs in
-- two thirds of the time, which a small query over it feels.
create view steps as
with shot as (
    select session_id, step,
        arg_max({'sha256': sha256, 'url': url, 'time': time}, (time, stream, seq)) as s
    from screenshot_taken group by session_id, step
),
parse as (
    select session_id, step,
        arg_max({'actions': actions, 'thought': thought, 'error': error, 'call_id': call_id},
            (time, stream, seq)) as p
    from action_parsed group by session_id, step
),
calls as (
    select session_id, step, count(*) as calls,
        arg_max(response, time) as last_response,
        sum(latency_ms) as latency_ms,
        sum(prompt_tokens) as prompt_tokens,
        sum(completion_tokens) as completion_tokens
    from model_called group by session_id, step
),
responses as (
    select session_id, call_id, arg_max(response, time) as response
    from model_called group by session_id, call_id
),
ops as (
    select session_id, step, count(*) as ops,
        count(*) filter (where not ok) as op_errors,
        arg_max(url_after, idx) as url_after
    from browser_acted group by session_id, step
),
joined as (
    select * from shot
    full join parse using (session_id, step)
    full join calls using (session_id, step)
    full join ops using (session_id, step)
)
select j.session_id, j.step,
    j.s.sha256 as screenshot_sha256,
    j.s.url as url,
    coalesce(rs.response, j.last_response) as response,
    j.p.actions as actions,
    j.p.thought as thought,
    j.p.error as parse_error,
    j.p.call_id as call_id,
    coalesce(j.calls, 0) as calls,
    j.latency_ms, j.prompt_tokens, j.completion_tokens,
    coalesce(j.ops, 0) as ops,
    coalesce(j.op_errors, 0) as op_errors,
    j.url_after,
    j.s.time as time
from joined j
left join responses rs on rs.session_id = j.session_id and rs.call_id = j.p.call_id;

-- Every model call's request in full, by where the call's line is (stream, seq). Since format 2
-- a call's line writes in full only the messages not already written in its stream: the table
-- model_called keeps the line as written (messages: those; message_refs: for each message of the
-- request, the byte offset of the line holding it in full and its index there; byte_offset: where
-- the call's own line is). The request is put back together from the stream's earlier calls by a
-- window, not a join: DuckDB drops an unread window from a query, never a join, so a query of
-- model_calls that reads none of messages, images and image_sha256s scans model_called alone.
-- model_requests and model_calls share it: a table macro, not a view, so that it is no view of
-- its own (listed, exported); DuckDB drops the unread window through it as through a CTE
-- (tests/store/test_compact_requests.py reads the plans).
create or replace macro model_called_requests() as table
with written as (
    select *,
        case when message_refs <> '[]' then list(byte_offset) over earlier end as written_at,
        case when message_refs <> '[]' then list(messages) over earlier end as written
    from main.model_called
    window earlier as (partition by stream order by seq
        rows between unbounded preceding and current row)
)
select * exclude (written_at, written) replace (
    case when message_refs = '[]' then messages else
        to_json(list_filter(list_transform(from_json(message_refs, '[["BIGINT"]]'),
            lambda r: json_extract(written[list_position(written_at, r[1])], r[2])),
            lambda m: m is not null))
    end as messages)
from written;

create view model_requests as
select stream, seq, session_id, step, call_id, attempt, messages
from model_called_requests();

create view model_calls as
select session_id, step, call_id, attempt, purpose, model,
    try_cast(sampling ->> 'temperature' as double) as temperature,
    try_cast(sampling ->> 'top_p' as double) as top_p,
    try_cast(sampling ->> 'max_tokens' as bigint) as max_tokens,
    try_cast(sampling ->> 'frequency_penalty' as double) as frequency_penalty,
    sampling -> 'chat_template_kwargs' as chat_template_kwargs,
    latency_ms, prompt_tokens, completion_tokens, finish_reason, error,
    response,
    served_by,
    http_status, response_blob,
    len(list_filter(json_extract_string(messages, '$[*].parts[*].type'), lambda t: t = 'image'))
        as images,
    list_filter(json_extract_string(messages, '$[*].parts[*].sha256'), lambda s: s is not null)
        as image_sha256s,
    time, run_id,
    messages
from model_called_requests();

create view actions as
with parse as (
    select * from action_parsed
    qualify row_number() over (
        partition by session_id, step order by time desc, stream desc, seq desc)
        = 1
),
items as (
    select session_id, step, call_id, parser,
        generate_subscripts(json_extract(actions, '$[*]'), 1) - 1 as idx,
        unnest(json_extract(actions, '$[*]')) as action
    from parse
)
select session_id, step, idx,
    action ->> 'kind' as kind,
    try_cast(action ->> 'x' as double) as x,
    try_cast(action ->> 'y' as double) as y,
    try_cast(action ->> 'model_x' as double) as model_x,
    try_cast(action ->> 'model_y' as double) as model_y,
    try_cast(action ->> 'x2' as double) as x2,
    try_cast(action ->> 'y2' as double) as y2,
    case action ->> 'kind'
        when 'type' then action ->> 'text'
        when 'hotkey' then array_to_string(json_extract_string(action, '$.keys[*]'), '+')
        when 'key_down' then action ->> 'key'
        when 'key_up' then action ->> 'key'
        when 'goto' then action ->> 'url'
        when 'search' then action ->> 'query'
        when 'memorize' then action ->> 'fact'
        when 'finish' then action ->> 'answer'
        when 'call_user' then coalesce(action ->> 'text', '')
        when 'fail' then coalesce(action ->> 'reason', '')
        when 'rejected' then coalesce(action ->> 'reason', '')
    end as text,
    case when action ->> 'kind' in ('click', 'button_down', 'button_up')
        then coalesce(action ->> 'button', 'left') end as button,
    case when action ->> 'kind' = 'click' then coalesce(try_cast(action ->> 'count' as bigint), 1)
        end as clicks,
    action ->> 'direction' as direction,
    case when action ->> 'kind' = 'scroll'
        then coalesce(try_cast(action ->> 'amount' as double), 1.0) end as amount,
    coalesce(action ->> 'raw', '') as raw,
    action,
    call_id, parser
from items;

create view effects as
select session_id, step, idx, action_idx,
    op ->> 'op' as op,
    ok, error, url_before, url_after,
    case when element is not null then coalesce(element ->> 'tag', '') end as element_tag,
    case when element is not null then coalesce(element ->> 'id', '') end as element_id,
    case when element is not null then coalesce(element ->> 'role', '') end as element_role,
    case when element is not null then coalesce(element ->> 'name', '') end as element_name,
    case when element is not null then coalesce(element ->> 'css_path', '') end as css_path,
    element -> 'bbox' as element_bbox,
    case when element is not null then coalesce(element ->> 'frame', '') end as element_frame,
    case when element is not null then coalesce(element ->> 'text', '') end as element_text,
    try_cast(op ->> 'x' as double) as x,
    try_cast(op ->> 'y' as double) as y,
    case op ->> 'op'
        when 'keyboard.type' then op ->> 'text'
        when 'keyboard.press' then op ->> 'key'
        when 'keyboard.down' then op ->> 'key'
        when 'keyboard.up' then op ->> 'key'
        when 'page.goto' then op ->> 'url'
        when 'pyautogui' then op ->> 'text'
    end as text,
    pages_opened,
    dialog ->> 'type' as dialog_type,
    dialog ->> 'message' as dialog_message,
    download, duration_ms,
    op as operation,
    time,
    -- a desktop's operation: the command sent to its server and the server's answer
    command, http_status, returncode, output, guest_error
from browser_acted;

create view screenshots as
select session_id, step, sha256, width, height, url, media_type, capture_ms,
    'blobs/' || sha256[1:2] || '/' || sha256 as blob_path,
    time,
    a11y  -- blob sha256 of a desktop step's accessibility tree (--a11y), else null
from screenshot_taken;

create view grades as
select session_id, grader, grader_version, score, passed, source, details,
    time as graded_at,
    coalesce(against_seal, '') = '' and source <> 'judge' and row_number() over (
        partition by session_id, coalesce(against_seal, '') = '' and source <> 'judge'
        order by time desc, stream desc, seq desc) = 1 as latest,
    run_id,
    coalesce(against_seal, '') as against_seal,
    checks  -- JSON list of {name, passed, expected, actual, actual_normalized}
from session_graded;

-- A model judge's verdicts (ownloop judge), never a session's grade: judge is the judge's
-- name, control the kind of control session (blank, swapped) or NULL, repeat which of the
-- judging's repeats, reasoning the judge's text before its verdict line.
create view judge_grades as
select session_id, run_id,
    split_part(grader, '/control:', 1)[7:] as judge,
    nullif(split_part(grader, '/control:', 2), '') as control,
    grader_version as judge_version,
    passed,
    try_cast(try_cast(details as json) ->> 'repeat' as bigint) as repeat,
    try_cast(details as json) ->> 'reasoning' as reasoning,
    time as judged_at
from session_graded
where source = 'judge';

create view evidence as
select session_id, name,
    try_cast(value_json as json) as value,
    sha256, media_type, source, time
from evidence_captured;

-- rung: the step's lowest rung of a guarded replay (ops, actions); exact .. failed count its
-- replayed operations by rung (NULL rung: the step was not guarded).
create view fidelity as
select session_id, step, parent_session_id, screenshot_identical, pixel_diff, url_equal,
    element_equal, diverged,
    min(step) filter (where diverged) over (partition by session_id) as first_divergent_step,
    nullif(rung, '') as rung, exact_ops as exact, same_target_ops as same_target,
    retargeted_ops as retargeted, diverged_ops as diverged_ops, failed_ops as failed,
    time
from fidelity_measured;

-- A guarded replay's checks: per step its screenshot (idx NULL), per pointer operation the
-- element under its point, and what the replay did when one did not pass.
create view guard_checks as
select session_id, step, idx, "check", passed, reason, distance, nullif(on_diverge, '')
    as on_diverge, nullif("match", '') as "match", x, y, nullif(rung, '') as rung,
    recorded ->> 'name' as recorded_name, found ->> 'name' as found_name, recorded, found,
    parent_session_id, time
from guard_checked;

-- Journal lines the index did not trust: an edited line (bad checksum), a line that does not
-- link to the one before (removed or reordered lines), a sequence gap, or a line that does not
-- decode. Quarantined lines are not in any other view unless the index was rebuilt with
-- --accept-damaged (projected = true). `ownloop verify` names the same lines.
create view damage as
select stream, byte_offset, byte_length, kind, detail, projected from damaged_lines
union all
select s.stream, s.byte_offset, null, 'unreadable', s.error, false
from skipped_lines s anti join damaged_lines d using (stream, byte_offset);

-- The sessions the runs recorded themselves: the sessions view without the replays (children:
-- parent_session_id set, e.g. audit replays). Retried attempts are still here; the scores count
-- one session per unit (scored_units, unit_outcomes), so `avg(score) from recorded` over a run
-- with retries can differ from its run_scores score.
create view recorded as select * from sessions where parent_session_id is null;

-- Statistics. The scored unit is the ledger's: one session per (run, task, repeat), the one
-- SessionCounted marked counted. A unit no SessionCounted settled (an imported run, or one
-- recorded before the ledger) takes its first session to end with a scored status. Replays are
-- left out. passed is the unit's latest grade (NULL: ungraded, left out of the views below).
create view scored_units as
with own as (
    select * from recorded where task_id is not null
),
ledger as (
    select run_id, task_id, repeat, arg_min(session_id, ended_at) as session_id
    from own where counted group by run_id, task_id, repeat
),
unsettled as (
    select run_id, task_id, repeat, arg_min(session_id, ended_at) as session_id
    from own
    where status in ('finished', 'call_user', 'fail', 'max_steps', 'timeout', 'parse_error',
                     'no_action')
    group by run_id, task_id, repeat
),
units as (
    select run_id, task_id, repeat, session_id, true as counted from ledger
    union all
    select u.run_id, u.task_id, u.repeat, u.session_id, false
    from unsettled u anti join ledger l using (run_id, task_id, repeat)
)
select u.run_id, u.task_id, u.repeat, u.session_id, s.passed, s.score, s.status,
    u.counted
from units u join own s using (session_id);

-- Every unit a run planned, and how it ended. Planned: each task id its first RunStarted
-- declared, in each of its repeats, and every (task, repeat) its own sessions ran (all a run
-- that declared none has). A planned unit with no scored session is **errored**: its sessions
-- ended with a status no grade follows (endpoint_error, error, crashed, interrupted, or any other
-- such status), never ended, or it has none ('missing'); status says which (of its last
-- session). scores_as is what the scores count: the grade, false for an errored unit (an error
-- is a failure, as tau-bench and Inspect count it), NULL for an ungraded one (left out).
create view unit_outcomes as
with own as (
    select * from sessions where parent_session_id is null and task_id is not null
),
declared as (
    select run_id, arg_min(task_ids, time) as task_ids,
        arg_min(coalesce(repeats, 1), time) as repeats
    from run_started group by run_id
),
planned as (
    select d.run_id, t.task_id, r.repeat
    from declared d,
        unnest(coalesce(from_json(d.task_ids, '["VARCHAR"]'), []::varchar[])) t(task_id),
        range(1, d.repeats + 1) r(repeat)
    union
    select run_id, task_id, repeat from own
),
last_try as (
    select run_id, task_id, repeat,
        arg_max(session_id, coalesce(ended_at, started_at)) as session_id,
        arg_max(coalesce(status, 'unfinished'), coalesce(ended_at, started_at)) as status,
        arg_max(error, coalesce(ended_at, started_at)) as error
    from own group by run_id, task_id, repeat
)
select p.run_id, p.task_id, p.repeat,
    coalesce(s.session_id, l.session_id) as session_id,
    coalesce(s.status, l.status, 'missing') as status,
    s.passed, s.score,
    case when s.session_id is null then 'errored' when s.passed is null then 'ungraded'
        when s.passed then 'passed' else 'failed' end as outcome,
    s.session_id is null as errored,
    case when s.session_id is null then false else s.passed end as scores_as,
    case when s.session_id is null then l.error end as error,
    coalesce(s.counted, false) as counted
from planned p
left join scored_units s using (run_id, task_id, repeat)
left join last_try l using (run_id, task_id, repeat);

-- Per task and k = 1..n, with c = passes: pass@k = 1 - C(n-c, k) / C(n, k) and
-- pass^k = C(c, k) / C(n, k), as products of k ratios (exact for small n, no factorials). Over
-- unit_outcomes' scores_as: an errored repeat is a failed one, so every task of a run has all
-- its planned repeats; a task has rows for k = 1..n only, n its units (errored counted).
create view task_outcomes as
with t as (
    select run_id, task_id, count(*) as n, count(*) filter (where scores_as) as passes,
        count(*) filter (where errored) as errored
    from unit_outcomes where scores_as is not null group by run_id, task_id
)
select run_id, task_id, n, passes, passes / n as pass_rate, r.k,
    case when n - passes < r.k then 1.0
        else 1.0 - list_product(list_transform(range(r.k), lambda j: (n - passes - j) / (n - j)))
        end as pass_at_k,
    case when passes < r.k then 0.0
        else list_product(list_transform(range(r.k), lambda j: (passes - j) / (n - j)))
        end as pass_hat_k,
    errored
from t, range(1, n + 1) r(k);

-- Wilson's interval over sessions (z = 1.959964, 95%) and the task-clustered bootstrap, both
-- over unit_outcomes' scores_as: sessions counts the units scored, errored those of them that
-- are errored units counted as failures, graded the others.
create table score_bootstraps (run_id VARCHAR primary key, units_md5 VARCHAR, tasks BIGINT,
    sessions BIGINT, score DOUBLE, ci_low DOUBLE, ci_high DOUBLE, resamples BIGINT,
    seed BIGINT, errored BIGINT);

create view run_scores as
with u as (
    select run_id, count(distinct task_id) as tasks, count(*) as sessions,
        count(*) filter (where scores_as) as passes, count(*) filter (where errored) as errored
    from unit_outcomes where scores_as is not null group by run_id
),
z as (
    select *, passes / sessions as p, 1.959963984540054 as z from u
),
w as (
    select *, (p + z * z / (2 * sessions)) / (1 + z * z / sessions) as centre,
        z / (1 + z * z / sessions)
            * sqrt(p * (1 - p) / sessions + z * z / (4 * sessions * sessions)) as half
    from z
),
r as (
    select run_id, arg_min(agent, time) as agent, arg_min(model, time) as model
    from run_started group by run_id
),
named as (
    select run_id, min(agent) as agent, min(model) as model from sessions group by run_id
)
select w.run_id, coalesce(nullif(r.agent, ''), n.agent) as agent,
    coalesce(nullif(r.model, ''), n.model) as model,
    w.tasks, w.sessions, w.p as score,
    case when w.passes = 0 then 0.0 else greatest(0.0, w.centre - w.half) end as ci_low,
    case when w.passes = w.sessions then 1.0 else least(1.0, w.centre + w.half) end as ci_high,
    'wilson' as method, w.errored, w.sessions - w.errored as graded
from w left join r using (run_id) left join named n using (run_id)
union all
select b.run_id, coalesce(nullif(r.agent, ''), n.agent), coalesce(nullif(r.model, ''), n.model),
    b.tasks, b.sessions,
    b.score, b.ci_low, b.ci_high, 'task_bootstrap', b.errored, b.sessions - b.errored
from score_bootstraps b left join r using (run_id) left join named n using (run_id);

-- Tasks whose repeats disagree: outcomes in repeat order.
create view flips as
select run_id, task_id, count(*) as n, count(*) filter (where passed) as passes,
    list(passed order by repeat) as outcomes
from scored_units where passed is not null
group by run_id, task_id
having bool_or(passed) and not bool_and(passed);

create view flip_rates as
select run_id, count(*) as tasks,
    count(*) filter (where bool_or_passed and not bool_and_passed) as flipped,
    flipped / count(*) as flip_rate
from (
    select run_id, task_id, bool_or(passed) as bool_or_passed, bool_and(passed) as bool_and_passed
    from scored_units where passed is not null group by run_id, task_id
) group by run_id;

-- Blind replays (`ownloop audit blind`): a run's passing session re-executed as its recorded
-- operations (replay --execute ops: no model, no screenshot read to decide) on another episode
-- of its task (another seed; a desktop task, whose start state is its setup, on a reset desktop:
-- session_started.audit = 'blind'), where no guard check changed what ran (on_diverge ignore, or
-- every check passed). A task whose blind replay passes does not measure the agent.
create view blind_replays as
with child as (
    select session_id, arg_min(parent_session_id, time) as parent_session_id,
        arg_min(replay_mode, time) as replay_mode,
        arg_min(try_cast(task ->> 'seed' as bigint), time) as seed,
        arg_min(audit, time) as audit
    from session_started where parent_session_id is not null group by session_id
)
select p.run_id, p.task_id, p.session_id as parent_session_id, c.session_id,
    c.task_id as episode, ch.seed, c.status, c.passed, c.score
from child ch join sessions c using (session_id)
join sessions p on p.session_id = ch.parent_session_id
where ch.replay_mode = 'ops' and (c.task_id <> p.task_id or ch.audit = 'blind')
    and p.parent_session_id is null
    and p.passed
    and not exists (select 1 from guard_checked g where g.session_id = c.session_id
                    and not g.passed and g.on_diverge in ('stop', 'retarget', 'fork'));

-- Per task of a run: its graded blind replays, how many passed, and the flag.
create view blind_audit as
select run_id, task_id, count(*) as replays, count(*) filter (where passed) as passes,
    passes / replays as blind_pass_rate, passes > 0 as non_discriminative
from blind_replays where passed is not null
group by run_id, task_id;

create view non_discriminative as
select run_id, task_id, replays, passes, blind_pass_rate from blind_audit
where non_discriminative;

-- Null-agent replays (`ownloop audit noop`): a run's session re-executed with none of its steps
-- (replay --execute ops over zero steps, ending no_action with no answer): the task's setup on
-- the episode the run used, no action at all, then the task's graders.
create view noop_replays as
select p.run_id, p.task_id, p.session_id as parent_session_id, c.session_id, c.status,
    c.passed, c.score
from sessions c join sessions p on p.session_id = c.parent_session_id
where c.replay_mode = 'ops' and c.task_id = p.task_id and c.steps = 0
    and c.status = 'no_action' and c.answer is null and p.parent_session_id is null;

-- Per task of a run: its graded null-agent replays, their best score, and the flag: the
-- untouched start state passes, or scores above 0.2 (`audit noop --threshold` prints others).
create view noop_audit as
select run_id, task_id, count(*) as replays, count(*) filter (where passed) as passes,
    max(score) as noop_score, coalesce(max(score) > 0.2, false) or bool_or(passed)
        as passes_untouched
from noop_replays where passed is not null group by run_id, task_id;

create view passes_untouched as
select run_id, task_id, replays, passes, noop_score from noop_audit where passes_untouched;

-- Why a session did not pass, in one line: the latest grade's first failed check ("answer:
-- expected 'Myron', got 'Myro'"), else the grade's details when it failed, else the session's
-- error (endpoint_error, error, crashed...). NULL for a session that passed or has neither.
create view failure_reasons as
with g as (
    select session_id, passed, details,
        list_filter(
            coalesce(from_json(checks, '[{"name": "VARCHAR", "passed": "BOOLEAN", '
                || '"expected": "VARCHAR", "actual": "VARCHAR"}]'), []),
            lambda c: not coalesce(c.passed, false))[1] as failed
    from grades where latest
)
select s.session_id,
    case when g.passed = false and g.failed is not null
            then g.failed.name || ': expected ' || coalesce(g.failed.expected, '') || ', got '
                || coalesce(g.failed.actual, '')
        when g.passed = false then coalesce(nullif(g.details, ''), 'failed (' || s.grader || ')')
        when g.passed is null and s.error is not null then s.status || ': ' || s.error
        when g.passed is null and s.status is not null and s.status not in ('finished',
            'call_user', 'fail', 'max_steps', 'timeout', 'parse_error', 'no_action')
            then s.status
    end as reason
from sessions s left join g using (session_id);
