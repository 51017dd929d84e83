# Scoring: every dimension computed in code per run and analyzer (optionally a second opinion from an LLM
# judge), then gathered into the session's scores.tsv.


rule judge_score:
    input:
        manifest=run_path(layout.MANIFEST),
        log=run_path(layout.STRIPPED_LOG),
        analyzers=run_path(layout.LOGSAGE_INDEX),
        fr_analyzers=run_path(layout.FR_INDEX),
    output:
        score=run_path(layout.SCORE_JSON),
    log:
        rule_log("judge_score"),
    conda:
        "../envs/faultloop.yaml"
    resources:
        fresh=fresh("judge_score", layout.SCORE_JSON),
    params:
        cli=FAULTLOOP,
        gpus_per_node=config["gpus_per_node"],
        segment_size=config["fr_segment_size"],
        mode=config["judge"]["mode"],
        llm=llm_flags(config["judge"]) if config["judge"]["mode"] != "code" else "",
        version=SCORE_VERSION,
        merged=MERGED_SPECS,
    shell:
        # The analyze layer's last step (the verdicts merged from the others: faultloop's combined
        # verdict), then the scoring of every verdict.
        '({params.cli} analyzers merge --cell-dir "$(dirname {input.manifest:q})"'
        " --specs {params.merged:q} --fresh {resources.fresh}"
        ' && {params.cli} score --cell-dir "$(dirname {input.manifest:q})"'
        " --gpus-per-node {params.gpus_per_node} --segment-size {params.segment_size}"
        " --judge-mode {params.mode} {params.llm} --version {params.version}"
        " --fresh {resources.fresh} --output {output.score:q}) > {log:q} 2>&1"


rule score:
    input:
        scores=expand(run_path(layout.SCORE_JSON), run=RUNS),
    output:
        tsv=f"{SESSION}/{layout.SCORES_TSV}",
        records=f"{SESSION}/{layout.SCORE_RECORDS}",
    log:
        f"{SESSION}/logs/score.log",
    conda:
        "../envs/faultloop.yaml"
    params:
        cli=FAULTLOOP,
        session=lambda wildcards, output: str(Path(output.tsv).parent),
        # Every pool cell in priority order; cells outside this invocation keep their stored
        # score, cells never run are listed as such.
        cells=[c.name for c in POOL],
        analyzers=SCORED_ANALYZERS,
    script:
        "../scripts/score.py"
