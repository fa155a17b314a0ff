"""The scorers stage: every method as a function of what it may know (``METHOD_INPUTS``).

A scorer maps (rows, batch) to an (S, V) score matrix; a masked scorer also reads the basket's
shown products and returns one row per masked position. Never the basket's products, size,
spend or labels, except the conditional rows (``CONDITIONAL``), which are told the basket's
mission and are compared with a counting baseline told the same.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from retailsim_core.baselines import counting as bl
from retailsim_core.models.inputs import MISSION_COLUMNS
from retailsim_core.next_basket.oracle_scorers import honest_oracle_scorer, oracle_scorer
from retailsim_core.next_basket.tasks import EvalTasks
from retailsim_core.serving.scorer import (
    MaskedScorer,
    Scorer,
    weekly_scorer,
    world_model_masked_scorer,
    world_model_scorer,
)
from retailsim_core.synth.world import PlantedTruth

REFRESHED = "world_model (refreshed)"  # each week scored by the refresh of the week before
HISTORY = "the customer's trips before the basket's week"
POPULARITY = "product counts of weeks before the evaluated period"
CONTEXT = "the trip's store, date and hour; shelf prices (D45)"
METHOD_INPUTS = {
    "world_model": f"{HISTORY}; {CONTEXT}; customer snapshots as of the week. No basket labels.",
    REFRESHED: "as world_model, from the model refreshed with every week before the basket's "
    "(model_refresh, D111): the weeks the counting baselines read.",
    "world_model | given mission": "as world_model, plus the basket's true mission type and focus "
    "(the simulation use; compare with Mission-P-TopFreq)",
    "G-TopFreq": POPULARITY,
    "P-TopFreq": f"{HISTORY} (ties in product order)",
    "GP-TopFreq": f"{HISTORY}; {POPULARITY}",
    "Store-P-TopFreq": f"{HISTORY}; the trip's store; {POPULARITY}",
    "Mission-P-TopFreq": f"{HISTORY}; the basket's true mission type and focus; {POPULARITY}",
    "TIFU-KNN": f"{HISTORY}; other customers' trips before the evaluated period",
    "UP-CF@r": f"{HISTORY}; other customers' trips before the evaluated period",
    "SASRec": f"{HISTORY} (trained on training weeks)",
    "BERT4Rec": f"{HISTORY} (trained on training weeks)",
    "P-TopFreq + co-purchase": f"masked items only: {HISTORY}, the basket's shown products, "
    "co-purchase rates of training weeks",
    "oracle": "synthetic only: the generator's planted probabilities given the basket's "
    "planted mission",
    "oracle (no mission)": "synthetic only: the planted probabilities averaged over the "
    "missions the shopper might be on, given the planted customer, the store and the hour",
}
CONDITIONAL = (
    "world_model | given mission",
    "Mission-P-TopFreq",
    "oracle",
)  # told the basket's mission


# Methods that read the basket's mission (a label LGSR has and other sources may not).
MISSION_METHODS = ("world_model | given mission", "Mission-P-TopFreq")


def has_missions(basket_labels: np.ndarray) -> bool:
    """Whether any basket has a mission type or focus (T6 columns MISSION_COLUMNS; 0 = absent).
    A source without them (The Complete Journey) gets no mission-conditioned methods (D85)."""
    return bool((np.asarray(basket_labels)[:, list(MISSION_COLUMNS)] > 0).any())


def method_scorers(
    tasks: EvalTasks,
    tuned: dict,
    truth: PlantedTruth | None,
    log: Callable[[str], None],
) -> tuple[dict[str, Scorer], dict[str, MaskedScorer], str | None]:
    """Next-basket scorers and masked-item scorers of every method, and a note when the oracles
    were skipped. ``tuned``: the tuning stage's baselines; ``truth``: the planted truth bound
    to the ingested files, or None (no oracle)."""
    data, trips, pop, model = tasks.data, tasks.trips, tasks.popularity, tasks.model
    scorers = {
        "world_model": world_model_scorer(model),
        "world_model | given mission": world_model_scorer(model, given_mission=True),
        "G-TopFreq": lambda rows, b: bl.g_topfreq(pop["test"], len(rows)),
        "P-TopFreq": lambda rows, b: bl.p_topfreq(bl.personal_counts(data, rows, trips)),
        "GP-TopFreq": lambda rows, b: bl.gp_topfreq(
            bl.personal_counts(data, rows, trips), pop["test"]
        ),
        "Store-P-TopFreq": lambda rows, b: bl.store_p_topfreq(data, rows, trips, pop["test"]),
        "Mission-P-TopFreq": lambda rows, b: bl.mission_p_topfreq(data, rows, trips, pop["test"]),
        **tuned["scorers"],
    }
    if tasks.refreshed:  # each test week by the refresh made from the weeks before it
        weeks = tasks.samples["week"].to_numpy()
        scorers[REFRESHED] = weekly_scorer(tasks.refreshed, weeks, data)
    note = None
    if truth is not None and truth.world is not None:
        try:
            scorers["oracle"] = oracle_scorer(truth, tasks.samples, data.vocab)
            scorers["oracle (no mission)"] = honest_oracle_scorer(
                truth, tasks.samples, data.vocab, data.basket_context.hour
            )
        except ValueError as err:  # a truth folder of other raw files: no oracle, said
            note = f"oracle skipped: {err}"
            log(note)
    if not has_missions(data.basket_labels):
        for name in MISSION_METHODS:  # nothing to condition on: they would repeat others
            scorers.pop(name)
        log(f"no mission labels in the source: {', '.join(MISSION_METHODS)} left out")
    masked = {
        "world_model": world_model_masked_scorer(model),
        "P-TopFreq + co-purchase": tuned["copurchase"],
    }
    return scorers, masked, note
