"""The core's packages in one order, lowest first: a package imports only those below it, so
reading the code bottom-up never meets a name from above (and no package cycle can form).

``pipeline`` is the edge: the only core package that reads the warehouse for evaluation and
serving, above everything it composes. ``__main__`` modules are entry points, above it all.
"""

from tests.core.test_import_graph import import_graph

LAYERS = (
    "calendar",
    "split",
    "settings",
    "native",
    "storage",  # the Parquet warehouse, atomic writes
    "ingest",  # LGSR week files in
    "derived_prices",
    "customers",
    "features",
    "datasets",  # trips, vocabulary, shelf, tensors
    "models",
    "graph",  # trains GraphSAGE (models) on the product graph
    "tables",  # the registry: names, and the schemas of the domains below
    "synth",
    "training",
    "baselines",
    "counterfactual",  # basket simulation under other prices, elasticities
    "serving",  # the world model as a scorer, the service's context
    "next_basket",  # the next-basket evaluation
    "response",  # price and demand response checks, the response prior
    "report",  # the evaluation report
    "evaluation",  # the protocol that runs the three rooms above
    "pricing",  # the pricing environment, policies and their judges (D89)
    "demand",  # unit panels, forecasts made before each week, their scores (D115)
    "pipeline",
)
ABOVE_ALL = ("entry point", "retailsim_dagster", "retailsim_serve")


def layer_of(module: str) -> str:
    """The layer a module belongs to: its core package (or root module), ``entry point`` for a
    core ``__main__``, else its top-level package."""
    parts = module.split(".")
    if parts[0] != "retailsim_core":
        return parts[0]
    if parts[-1] == "__main__":
        return "entry point"
    return parts[1] if len(parts) > 1 else "retailsim_core"


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module from a layer that is not below the importer's."""
    rank = {name: i for i, name in enumerate((*LAYERS, *ABOVE_ALL))}
    out = []
    for module, targets in sorted(graph.items()):
        here = layer_of(module)
        for target in sorted(targets):
            there = layer_of(target)
            if there == here or there == "retailsim_core":
                continue
            if here not in rank or there not in rank:
                out.append(f"{module} -> {target}: a layer missing from LAYERS")
            elif rank[there] > rank[here] or (here in ABOVE_ALL and there in ABOVE_ALL):
                out.append(f"{module} ({here}) imports {target} ({there}), a layer above it")
    return out


def test_the_layering_check_finds_an_upward_import():
    graph = {
        "retailsim_core.next_basket.tasks": {"retailsim_core.pipeline.evaluation_run"},
        "retailsim_core.pipeline.evaluation_run": {"retailsim_core.next_basket.tasks"},
        "retailsim_core.training.__main__": {"retailsim_core.pipeline.world_model_training"},
        "retailsim_core.newroom.x": {"retailsim_core.split"},
    }
    assert violations(graph) == [
        "retailsim_core.newroom.x -> retailsim_core.split: a layer missing from LAYERS",
        "retailsim_core.next_basket.tasks (next_basket) imports "
        "retailsim_core.pipeline.evaluation_run (pipeline), a layer above it",
    ]


def test_every_package_imports_only_layers_below_it():
    graph = import_graph()
    assert any(layer_of(m) == "pipeline" for m in graph)  # the graph is read
    assert violations(graph) == []


def test_every_core_package_has_a_layer():
    graph = import_graph()
    core = {layer_of(m) for m in graph if m.startswith("retailsim_core.")} - {"entry point"}
    assert core <= set(LAYERS)
