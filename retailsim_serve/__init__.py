"""The world model over HTTP (FastAPI): ``make serve`` or ``python -m retailsim_serve``."""
