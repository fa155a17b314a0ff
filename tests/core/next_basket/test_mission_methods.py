"""A source without mission labels (The Complete Journey) gets no mission-conditioned methods:
they would only repeat the unconditioned ones under another name."""

from types import SimpleNamespace

import numpy as np

from retailsim_core.next_basket.methods import MISSION_METHODS, has_missions, method_scorers


def _scorers(basket_labels: np.ndarray) -> tuple[set[str], list[str]]:
    tasks = SimpleNamespace(
        data=SimpleNamespace(basket_labels=basket_labels),
        trips=None,
        popularity={"test": None},
        model=None,
        refreshed=None,
    )
    said: list[str] = []
    scorers, masked, _ = method_scorers(
        tasks, {"scorers": {}, "copurchase": None}, None, said.append
    )
    assert "world_model" in scorers and "world_model" in masked
    return set(scorers), said


def test_mission_methods_only_where_the_source_has_missions():
    lgsr = np.array([[1, 2, 1, 1], [0, 0, 0, 0]])  # mission type and focus known
    none = np.array([[0, 0, 3, 0], [0, 0, 0, 2]])  # price sensitivity or size only
    assert has_missions(lgsr) and not has_missions(none)
    with_missions, said = _scorers(lgsr)
    assert set(MISSION_METHODS) <= with_missions and not said
    without, said = _scorers(none)
    assert not set(MISSION_METHODS) & without and "left out" in said[0]
    assert with_missions - without == set(MISSION_METHODS)
