# The attribution tools, per cell. Their inputs never carry the injected truth: the log is
# stripped of the injection markers first, and the FR analyzer reads only the dumps.


rule strip_log:
    input:
        manifest=cell_path(layout.MANIFEST),
    output:
        log=cell_path(layout.STRIPPED_LOG),
    log:
        rule_log("strip_log"),
    conda:
        "../envs/faultloop.yaml"
    script:
        "../scripts/strip_log.py"


rule logsage:
    input:
        log=cell_path(layout.STRIPPED_LOG),
    output:
        text=cell_path(layout.LOGSAGE_TEXT),
        json=cell_path(layout.LOGSAGE_JSON),
    log:
        rule_log("logsage"),
    conda:
        "../envs/faultloop.yaml"
    params:
        settings=config["logsage"],
        version=LOGSAGE_VERSION,
    script:
        "../scripts/logsage.py"


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
        checkpoints=lambda wildcards: f"{SESSION}/{wildcards.cell}/checkpoints",
        gpus_per_node=config["gpus_per_node"],
        segment_size=config["fr_segment_size"],
        version=FR_VERSION,
    script:
        "../scripts/fr_analysis.py"
