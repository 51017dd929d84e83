"""logsage rule: attribute the failed job from its stripped log."""

from faultloop import logsage
from faultloop.workflow import logged, run_cli

settings = snakemake.params.settings
llm = settings.get("llm", {})

with logged(snakemake.log[0]):
    argv = [
        "--log-path", snakemake.input.log,
        "--mode", settings["mode"],
        "--output-text", snakemake.output.text,
        "--output-json", snakemake.output.json,
    ]
    if settings["mode"] == "llm":
        argv += ["--llm-base-url", llm.get("base_url", ""), "--llm-model", llm.get("model", ""),
                 "--llm-timeout", str(llm.get("timeout_s", 60)), "--llm-max-retries", str(llm.get("max_retries", 2))]
        if llm.get("api_key_file"):
            argv += ["--llm-api-key-file", llm["api_key_file"]]
    run_cli(logsage.main, argv)
