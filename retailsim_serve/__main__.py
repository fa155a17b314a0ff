"""``python -m retailsim_serve``: uvicorn on RETAILSIM_SERVE_HOST:RETAILSIM_SERVE_PORT
(127.0.0.1:8000 by default)."""

import ipaddress
import logging

import uvicorn

from retailsim_serve.runtime import ServeSettings

log = logging.getLogger("retailsim_serve")


def exposure_note(host: str) -> str | None:
    """A warning when the app will listen beyond this machine (a host that is not loopback)."""
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        if host == "localhost":
            return None
    return (
        f"RETAILSIM_SERVE_HOST={host}: listening beyond this machine (not loopback); "
        "anyone who can reach it can query the model"
    )


def main() -> None:
    settings = ServeSettings.from_env()
    note = exposure_note(settings.host)
    if note:
        logging.basicConfig(level=logging.INFO)
        log.warning(note)
    uvicorn.run(
        "retailsim_serve.app:app_from_environment",
        factory=True,
        host=settings.host,
        port=settings.port,
        log_level="info",
    )


if __name__ == "__main__":
    main()
