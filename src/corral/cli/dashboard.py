"""`corral dashboard`: the web dashboard's address, signed in with this client's token."""

from __future__ import annotations

from urllib.parse import quote

import click

from corral.cli.render import emit_json, output_option
from corral.client.config import load_config


@click.command()
@click.option("--open", "open_browser", is_flag=True, help="open it in the default web browser")
@click.option("--no-token", is_flag=True, help="print the bare address (the page then asks for a token)")
@output_option
def dashboard(open_browser: bool, no_token: bool, output: str) -> None:
    """Print the dashboard's URL, with this client's token in its #fragment.

    A browser never sends the fragment to the server; the page keeps the token in the browser's
    local storage and removes it from the address bar. Treat the URL like the token itself.
    """
    config = load_config()
    url = config.head_url.rstrip("/") + "/"
    if not no_token and config.token:
        url += "#token=" + quote(config.token, safe="")
    if output == "json":
        emit_json({"url": url})
    else:
        click.echo(url)
    if open_browser:
        import webbrowser

        webbrowser.open(url)
