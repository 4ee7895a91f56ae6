"""`surgeplan dashboard`: start the Streamlit app headless on HOST:PORT and print its URL.

Loopback by default: the app simulates on request and has no authentication, so exposing it on a
network interface is an explicit choice (`--host 0.0.0.0`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

APP = Path(__file__).resolve().parent / "app.py"


def streamlit_command(host: str, port: int) -> list[str]:
    """The `streamlit run` command line for the app: headless, no usage statistics, no file watcher."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.headless",
        "true",
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--client.toolbarMode",
        "minimal",
        "--theme.base",
        "light",
        "--theme.primaryColor",
        "#2563eb",
    ]


def dashboard_command(
    host: str = typer.Option(
        "127.0.0.1", "--host", help="interface to listen on (0.0.0.0: every interface)"
    ),
    port: int = typer.Option(8501, "--port", min=1, max=65535, help="TCP port"),
) -> None:
    """The what-if dashboard (Streamlit): spikes, traditional vs paged, traces, calibrations, plan, validate."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    typer.echo(f"surgeplan dashboard: http://{shown}:{port}  (Ctrl+C stops it)")
    sys.stdout.flush()
    command = streamlit_command(host, port)
    os.execv(command[0], command)  # become the server: Ctrl+C and kill reach Streamlit itself
