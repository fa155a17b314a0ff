"""Resources: where raw LGSR files are read from and where the warehouse lives.

Defaults come from the settings (``retailsim_core.settings``: ``RETAILSIM_RAW_DIR`` /
``RETAILSIM_WAREHOUSE_DIR`` / ``RETAILSIM_TRUTH_DIR`` when set, else the repository's
``data/raw``, ``data/warehouse`` and ``data/ground_truth``); all can also be set as resource
config. Every step checks the settings when its resources are set up, before any work: an
unknown ``RETAILSIM_*`` variable or an impossible value fails the run at once, naming it.
"""

from contextlib import AbstractContextManager
from pathlib import Path

import dagster as dg

from retailsim_core.baselines.sequential import SequentialConfig
from retailsim_core.graph.graph_edges import GraphConfig
from retailsim_core.ingest.file_reader import ReadLimits
from retailsim_core.models.world_model import WorldModelConfig
from retailsim_core.next_basket.eval_config import EvalConfig
from retailsim_core.pipeline.pricing_run import PricingRunConfig
from retailsim_core.pricing.environment import PricingConfig
from retailsim_core.settings import Settings, SettingsError, check_environment, load_settings
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.locks import exclusive
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.training.adapt.refresh import RefreshConfig
from retailsim_core.training.run.train_config import TrainConfig

MODEL_STEP_LOCK = ".model_step.lock"  # in the warehouse root


class RawSourceResource(dg.ConfigurableResource):
    """Folder of LGSR week files (``transactions_YYYYWW.csv`` or ``.csv.gz``)."""

    raw_dir: str
    # The synthetic generator's planted truth (enables the oracle in evaluation_report); empty for
    # real LGSR files.
    truth_dir: str = ""
    # A week ingested from a file whose file has since vanished fails the run unless this is
    # true; then the partition is replaced by an empty, missing-file one.
    replace_vanished_weeks: bool = False
    # The largest share of a week's rows that may be quarantined before the quarantine_share
    # check fails (a wrong export or a wrong week file, not a few bad rows).
    max_quarantine_share: float = 0.05

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        check_environment()
        default = Settings.model_fields["truth_dir"].default
        if self.truth_dir and self.truth_dir != default and not Path(self.truth_dir).is_dir():
            raise SettingsError(
                f"raw_source truth_dir {self.truth_dir}: no such folder (empty "
                "for real data, which has no planted truth)"
            )

    @property
    def path(self) -> Path:
        return Path(self.raw_dir)

    @property
    def source(self) -> str:
        """What the raw folder holds: LGSR week files or a Complete Journey export
        (RETAILSIM_SOURCE; D85)."""
        return load_settings().source

    @property
    def read_limits(self) -> ReadLimits:
        """When a week file counts as complete and how large it may be (RETAILSIM_SETTLE_SECONDS,
        RETAILSIM_MAX_WEEK_FILE_MIB; D83)."""
        return ReadLimits.of(load_settings())

    @property
    def truth(self) -> Path | None:
        return Path(self.truth_dir) if self.truth_dir and Path(self.truth_dir).exists() else None


class WarehouseResource(dg.ConfigurableResource):
    """Root of the Parquet warehouse (Hive ``week=<key>/`` layout for weekly tables)."""

    root: str

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        check_environment()
        if Path(self.root).exists() and not Path(self.root).is_dir():
            raise SettingsError(f"warehouse root {self.root} (RETAILSIM_WAREHOUSE_DIR) is a file")

    @property
    def warehouse(self) -> Warehouse:
        return Warehouse(Path(self.root), load_settings().calendar)

    def model_step(self, context) -> AbstractContextManager[float]:
        """Hold the warehouse's model-step lock (D113): one time-budgeted step (training,
        whole-test-set scoring) at a time on a warehouse, whatever runs it. The instance's
        ``cpu_heavy`` pool (dagster.yaml) does this across runs; an instance without it (a fresh
        DAGSTER_HOME) would run three at once, each budget spent on a third of the machine.
        A wait is logged as a warning: the step's budget starts when the wait ends."""

        def waiting(message: str) -> None:
            context.log.warning(
                f"{message}: another model step is running on this warehouse (is the "
                "instance's cpu_heavy pool set? see dagster.yaml); this one starts after it"
            )

        return exclusive(Path(self.root) / MODEL_STEP_LOCK, on_wait=waiting)


class PipelineConfigResource(dg.ConfigurableResource):
    """Settings shared by every stage: the one temporal split and the graph thresholds
    (design §2.3 values by default)."""

    # None: the settings' split (RETAILSIM_TRAIN_END / RETAILSIM_VALID_END), read when a run
    # starts, not when the definitions are imported.
    train_end: int | None = None
    valid_end: int | None = None
    min_lift: float = GraphConfig.min_lift
    min_count: int = GraphConfig.min_count
    min_jaccard: float = GraphConfig.min_jaccard
    substitution_rule: str = GraphConfig.substitution_rule  # "switching" (from data) | "spec"
    model_preset: str = "small"  # world model + training schedule: tiny | small | paper
    model_seed: int = 0
    eval_test_samples: int = 6_000  # test baskets scored by every method (0 = all)
    # pricing_policy (D89): top categories by revenue, test baskets per week in a panel, PPO
    # seeds (benchmarks/bench_pricing.py runs 5) and environment steps per seed, whether the
    # held-out simulator judges too, the objective (margin | revenue), unit cost / regular price.
    pricing_categories: int = PricingRunConfig.categories
    pricing_contexts: int = PricingRunConfig.contexts_per_week
    pricing_seeds: int = PricingRunConfig.seeds
    pricing_timesteps: int = PricingRunConfig.ppo_timesteps
    pricing_holdout: bool = PricingRunConfig.holdout
    pricing_objective: str = PricingConfig.objective
    pricing_cost_share: float = PricingConfig.cost_share
    # model_refresh (D111): the wall budget of one week's fine-tuning, seconds.
    refresh_seconds: float = RefreshConfig.max_seconds

    @property
    def evaluation(self) -> EvalConfig:
        return EvalConfig(
            max_test_samples=self.eval_test_samples or None,
            seed=self.model_seed,
            sequential=SequentialConfig(max_seconds=float(load_settings().sequential_seconds)),
        )

    @property
    def split(self) -> TemporalSplit:
        default = load_settings().split
        return TemporalSplit(
            default.train_end if self.train_end is None else self.train_end,
            default.valid_end if self.valid_end is None else self.valid_end,
            default.last_week,
        )

    @property
    def world_model(self) -> tuple[WorldModelConfig, TrainConfig]:
        return WorldModelConfig.preset(self.model_preset), TrainConfig.preset(
            self.model_preset, seed=self.model_seed
        )

    @property
    def pricing(self) -> PricingRunConfig:
        return PricingRunConfig(
            categories=self.pricing_categories,
            contexts_per_week=self.pricing_contexts,
            seeds=self.pricing_seeds,
            ppo_timesteps=self.pricing_timesteps,
            holdout=self.pricing_holdout,
            seed=self.model_seed,
            env=PricingConfig(objective=self.pricing_objective, cost_share=self.pricing_cost_share),
        )

    @property
    def refresh(self) -> RefreshConfig:
        return RefreshConfig(max_seconds=self.refresh_seconds, seed=self.model_seed)

    @property
    def graph(self) -> GraphConfig:
        return GraphConfig(
            min_lift=self.min_lift,
            min_count=self.min_count,
            min_jaccard=self.min_jaccard,
            substitution_rule=self.substitution_rule,
        )


def default_resources() -> dict:
    settings = load_settings()
    return {
        "raw_source": RawSourceResource(
            raw_dir=str(settings.raw_dir), truth_dir=settings.truth_dir
        ),
        "warehouse": WarehouseResource(root=str(settings.warehouse_dir)),
        "pipeline_config": PipelineConfigResource(),
    }
