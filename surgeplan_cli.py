"""The `surgeplan` front door: each package owns its sub-commands; this file only assembles them."""
import typer

app = typer.Typer(help="surgeplan: plan LLM serving capacity.", no_args_is_help=True)
