# The attribution tools, per cell. Their inputs never carry the injected truth: logsage reads
# the main log with every injection marker stripped (the stripped copy is kept as an output for
# the scorer and the report), and the FR analyzer reads only the dumps.


rule logsage:
    input:
        manifest=cell_path(layout.MANIFEST),
    output:
        log=cell_path(layout.STRIPPED_LOG),
        text=cell_path(layout.LOGSAGE_TEXT),
        json=cell_path(layout.LOGSAGE_JSON),
    log:
        rule_log("logsage"),
    conda:
        "../envs/faultloop.yaml"
    params:
        cli=FAULTLOOP,
        mode=config["logsage"]["mode"],
        llm=llm_flags(config["logsage"]) if config["logsage"]["mode"] == "llm" else "",
        version=LOGSAGE_VERSION,
    shell:
        "({params.cli} cell strip-log --manifest {input.manifest:q} --output {output.log:q}"
        " && {params.cli} logsage --log-path {output.log:q} --mode {params.mode} {params.llm}"
        " --output-text {output.text:q} --output-json {output.json:q}) > {log:q} 2>&1"


rule fr_analysis:
    input:
        manifest=cell_path(layout.MANIFEST),
    output:
        text=cell_path(layout.FR_TEXT),
        json=cell_path(layout.FR_JSON),
    log:
        rule_log("fr_analysis"),
    conda:
        "../envs/faultloop.yaml"
    params:
        cli=FAULTLOOP,
        checkpoints=lambda wildcards, input: str(
            Path(input.manifest).parent / "checkpoints"
        ),
        world_size=lambda wildcards: CELL[wildcards.cell].nodes
        * config["gpus_per_node"],
        gpus_per_node=config["gpus_per_node"],
        segment_size=config["fr_segment_size"],
        version=FR_VERSION,
    shell:
        '{params.cli} fr --fr-path "$(dirname {input.manifest:q})/checkpoints"'
        " --world-size {params.world_size}"
        " --gpus-per-node {params.gpus_per_node} --segment-size {params.segment_size}"
        " --output-text {output.text:q} --output-json {output.json:q} > {log:q} 2>&1"
