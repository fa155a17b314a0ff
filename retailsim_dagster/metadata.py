"""Small helpers that turn core outputs into Dagster metadata values."""

import dagster as dg
import polars as pl

MAX_MARKDOWN_ROWS = 150


def markdown_table(df: pl.DataFrame, max_rows: int = MAX_MARKDOWN_ROWS) -> str:
    """A Markdown table of a (small) frame, for the Dagster UI."""
    if df.is_empty():
        return "_none_"
    shown = df.head(max_rows)

    def fmt(v):
        return f"{v:.3f}" if isinstance(v, float) else ("" if v is None else str(v))

    lines = ["| " + " | ".join(shown.columns) + " |", "|" + "---|" * len(shown.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in shown.iter_rows()]
    if df.height > max_rows:
        lines.append(f"\n_{df.height - max_rows} more rows not shown_")
    return "\n".join(lines)


def table_schema(schema: pl.Schema) -> dg.TableSchema:
    return dg.TableSchema(
        columns=[dg.TableColumn(name, str(dtype)) for name, dtype in schema.items()]
    )
