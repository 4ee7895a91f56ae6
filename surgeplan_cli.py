"""The `surgeplan` front door: each package owns its sub-commands; this file only assembles them."""

import typer

from dashboard.cli import dashboard_command
from engine.openai.cli import serve
from simulator.calibration.cli import app as calibrations_app
from simulator.calibration.profile_command import profile_command
from simulator.cli import simulate_command
from simulator.planner.cli import plan_command, report_app
from simulator.planner.split_cli import plan_split_command
from simulator.validation.cli import validate_command
from traces.cli import app as traces_app
from traces.replay_cli import replay_command

app = typer.Typer(help="surgeplan: plan LLM serving capacity.", no_args_is_help=True)


@app.callback()
def main() -> None:
    """How many GPUs, with which batch settings, at what cost per request, keep latency inside the SLO?"""


app.add_typer(traces_app, name="traces")
app.add_typer(calibrations_app, name="calibrations")
app.command("profile")(profile_command)
app.command("serve")(serve)
app.command("replay")(replay_command)
app.command("simulate")(simulate_command)
app.command("plan")(plan_command)
app.command("plan-split")(plan_split_command)
app.add_typer(report_app, name="report")
app.command("validate")(validate_command)
app.command("dashboard")(dashboard_command)


@app.command()
def demo(
    requests: int = typer.Option(48, help="requests in the offline batch"),
    model: str = typer.Option("cpu-small", help="model preset (dummy weights)"),
    seed: int = typer.Option(0),
) -> None:
    """Continuous vs static batching on the engine, lengths drawn from the Azure conversation trace fit."""
    import numpy as np

    from engine import LLM
    from engine.workload import format_table, requests_of, run_workload, scale_lengths
    from traces.lengths import fitted_length

    rng = np.random.default_rng(seed)
    prompt_lengths, output_lengths, _ = scale_lengths(
        fitted_length("azure-conv-prompt").sample(rng, requests),
        fitted_length("azure-conv-output").sample(rng, requests),
        1 / 8,
        1 / 4,
        max_model_len=512,
    )
    settings = dict(
        load_format="dummy", max_model_len=512, num_kv_blocks=256, block_size=16, max_num_seqs=32
    )
    results = []
    for policy in ("continuous", "static"):
        llm = LLM(model, policy=policy, **settings)
        prompts, params = requests_of(
            prompt_lengths, output_lengths, llm.engine.model_config.vocab_size, seed
        )
        results.append(
            run_workload(llm.engine, prompts, params, label=f"{model} {policy}", progress=True)
        )
    typer.echo(
        f"{requests} requests, prompts {prompt_lengths.mean():.0f} / outputs {output_lengths.mean():.0f} tokens "
        f"on average (Azure conv fit scaled 1/8, 1/4); KV pool 256 blocks x 16 tokens, max_model_len 512"
    )
    typer.echo(format_table(results))
    cont, static = results
    typer.echo(
        f"continuous / static: {cont.output_tokens_per_s / static.output_tokens_per_s:.2f}x output tokens/s, "
        f"mean latency {cont.mean_latency_s / static.mean_latency_s:.2f}x"
    )


if __name__ == "__main__":
    app()
