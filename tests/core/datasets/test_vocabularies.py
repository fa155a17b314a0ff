"""Every code vocabulary has one source, in one order, and the special tokens have names."""

import re
from pathlib import Path

from retailsim_core.customers.customer_features import MISSION_SCHEMA
from retailsim_core.datasets import batch_inputs
from retailsim_core.datasets.tokens import PAD, ProductVocab, eos_token, mask_token
from retailsim_core.ingest import lgsr
from retailsim_core.models.world_model import AUX_HEADS

CORE = Path(__file__).resolve().parents[3] / "retailsim_core"


def test_mission_codes_are_written_once_in_the_core():
    literal = re.compile(r'"(Top Up|Small Shop|Full Shop|Nonfood)"')
    places = [
        str(p.relative_to(CORE))
        for p in CORE.rglob("*.py")
        for line in p.read_text().splitlines()
        if literal.search(line)
    ]
    assert places == ["ingest/lgsr.py"] * 2, places  # MISSION_TYPES and MISSION_FOCI


def test_one_order_for_codes_struct_fields_and_heads():
    assert batch_inputs.BASKET_TYPES == (*lgsr.MISSION_TYPES, "XX") == lgsr.BASKET_TYPE_CODES
    assert batch_inputs.MISSIONS == (*lgsr.MISSION_FOCI, "XX") == lgsr.MISSION_CODES
    assert tuple(MISSION_SCHEMA["mission_type_dist"].to_schema()) == lgsr.MISSION_TYPES
    assert tuple(MISSION_SCHEMA["mission_focus_dist"].to_schema()) == lgsr.MISSION_FOCI
    assert AUX_HEADS["mission_type"][1] == len(lgsr.MISSION_TYPES)
    assert AUX_HEADS["mission_focus"][1] == len(lgsr.MISSION_FOCI)


def test_special_tokens_frame_the_products():
    vocab = ProductVocab(("P1", "P2", "P3"))
    assert (PAD, vocab.mask, vocab.eos, vocab.size) == (0, 4, 5, 6)
    assert mask_token(vocab.size) == vocab.mask and eos_token(vocab.size) == vocab.eos
    assert vocab.frame()["token"].to_list() == [1, 2, 3]
