"""retailsim_core is a pure library: it never imports dagster or web code (FastAPI, uvicorn,
Starlette), directly or indirectly."""

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "retailsim_core"
FORBIDDEN = {"dagster", "fastapi", "uvicorn", "starlette", "retailsim_serve", "retailsim_dagster"}


def test_no_module_of_the_core_imports_dagster():
    offenders = []
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            )
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert not offenders


def test_importing_the_core_does_not_load_dagster():
    code = (
        "import sys, pkgutil, importlib, retailsim_core\n"
        "for m in pkgutil.walk_packages(retailsim_core.__path__, 'retailsim_core.'):\n"
        "    importlib.import_module(m.name)\n"
        f"print(sorted(set(m.split('.')[0] for m in sys.modules) & set({sorted(FORBIDDEN)!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
