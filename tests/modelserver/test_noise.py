"""The expert's ``--noise``: seeded draws, and the plausible wrong actions they stand for."""

from __future__ import annotations

import pytest

from ownloop.errors import OwnloopError
from ownloop.modelserver.noise import Noise, mislead
from ownloop.modelserver.plans import Widget
from ownloop.store.events import Click, Finish, TypeText

_OK = Widget(tag="button", text="OK", box=(10, 10, 40, 20))
_NO = Widget(tag="button", text="No", box=(100, 10, 40, 20))
_HIDDEN = Widget(tag="button", text="X", box=(200, 10, 40, 20), visible=False)


def test_the_same_seed_draws_the_same_numbers_and_each_ask_of_a_key_draws_anew() -> None:
    a, b = Noise(0.3, seed=7), Noise(0.3, seed=7)
    first = [a.draw("u step 0") for _ in range(5)]
    assert first == [b.draw("u step 0") for _ in range(5)]
    assert len(set(first)) == 5 and all(0 <= x < 1 for x in first)
    assert Noise(0.3, seed=8).draw("u step 0") != first[0]


def test_the_share_of_wrong_steps_is_near_the_probability() -> None:
    noise = Noise(0.3, seed=1)
    wrong = sum(noise.wrong("u step 0") is not None for _ in range(2000))
    assert 0.26 < wrong / 2000 < 0.34
    assert all(Noise(0.0).wrong("k") is None for _ in range(50))
    assert all(Noise(1.0).wrong("k") is not None for _ in range(50))


def test_a_probability_outside_0_to_1_is_refused() -> None:
    with pytest.raises(OwnloopError, match="--noise is a probability from 0 to 1, not 1.5"):
        Noise(1.5)


def test_a_wrong_click_lands_on_another_visible_element_and_typing_loses_a_character() -> None:
    actions = (Click(x=30, y=20), TypeText(text="Kasey"), Finish(answer="OK"))
    wrong = mislead(actions, (_OK, _NO, _HIDDEN), pick=0.9)
    assert wrong == (Click(x=120, y=20), TypeText(text="Kase"), Finish(answer="OK"))
    # no other element: the click lands beside its target
    assert mislead((Click(x=30, y=20),), (_OK,), pick=0.1) == (Click(x=90, y=50),)
    assert mislead((TypeText(text="a"),), (), pick=0.1) == (TypeText(text="ax"),)
