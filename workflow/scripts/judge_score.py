"""judge_score rule: grade one cell's attribution against its injected truth."""

from faultloop import score
from faultloop.workflow import logged, run_cli

params = snakemake.params
truth = params.truth
llm = params.judge.get("llm", {})

with logged(snakemake.log[0]):
    argv = [
        "--cell-dir", str(snakemake.input.manifest).rsplit("/", 1)[0],
        "--fault-type", truth["fault_type"],
        "--rank", str(truth["rank"]),
        "--iter", str(truth["iter"]),
        "--nodes", str(truth["nodes"]),
        "--gpus-per-node", str(params.gpus_per_node),
        "--segment-size", str(params.segment_size),
        "--judge-mode", params.judge["mode"],
        "--output", snakemake.output.score,
    ]
    if params.judge["mode"] != "code":
        argv += ["--llm-base-url", llm.get("base_url", ""), "--llm-model", llm.get("model", ""),
                 "--llm-timeout", str(llm.get("timeout_s", 120)), "--llm-max-retries", str(llm.get("max_retries", 2))]
        if llm.get("api_key_file"):
            argv += ["--llm-api-key-file", llm["api_key_file"]]
    run_cli(score.main, argv)
