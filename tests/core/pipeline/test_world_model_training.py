"""The price responses start from the training weeks alone (D88)."""

import torch
import torch.nn.functional as F

from retailsim_core.models.heads.products import PRODUCT_RESPONSES, PriceResponse
from retailsim_core.pipeline.readers.warehouse_inputs import load_model_inputs
from retailsim_core.pipeline.world_model_training import start_responses
from retailsim_core.response.response_prior import FLOOR
from retailsim_core.tables import SAMPLES_TABLE


def _started(wh, split, weeks):
    """A fresh price response started from ``weeks``' inputs (D88)."""
    inputs = load_model_inputs(wh, weeks)
    n = inputs.vocab.size
    response = PriceResponse(4, n, torch.zeros(2, 0, dtype=torch.long), torch.zeros(n))
    start_responses(
        response, wh, split, inputs.store, inputs.vocab, inputs.categories, lambda _: None
    )
    return response


def test_responses_start_from_training_weeks_only(tiny_warehouse):
    """The own-depth start reads the training weeks' trips and cuts: inputs that also hold the
    validation and test weeks give the same start, and it moved off the default."""
    wh, split = tiny_warehouse["warehouse"], tiny_warehouse["split"]
    weeks = wh.weeks(SAMPLES_TABLE)
    full = _started(wh, split, weeks)
    train_only = _started(wh, split, [w for w in weeks if w <= split.train_end])
    torch.testing.assert_close(full.raw_product_weights, train_only.raw_product_weights)
    own = full.product_weights[:, PRODUCT_RESPONSES.index("discount_depth")].detach()
    assert not torch.allclose(own, torch.full_like(own, float(F.softplus(torch.tensor(0.0)))))
    assert (own >= FLOOR - 1e-6).all()
