"""``python -m retailsim_serve``: uvicorn on RETAILSIM_SERVE_HOST:RETAILSIM_SERVE_PORT
(127.0.0.1:8000 by default)."""

import uvicorn

from retailsim_serve.runtime import ServeSettings


def main() -> None:
    settings = ServeSettings.from_env()
    uvicorn.run(
        "retailsim_serve.app:app_from_environment",
        factory=True,
        host=settings.host,
        port=settings.port,
        log_level="info",
    )


if __name__ == "__main__":
    main()
