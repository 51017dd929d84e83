"""score rule: gather every pool cell's score.json into the session's scores.tsv and scores.jsonl."""

from pathlib import Path

from faultloop.contracts import write_score_tables
from faultloop.core.cell import Cell
from faultloop.score.tables import gather
from faultloop.workflow.invocation import logged

with logged(snakemake.log[0]):
    session = Path(snakemake.params.session)
    cells = [Cell.from_name(name) for name in snakemake.params.cells]
    records = gather(session, cells, snakemake.params.analyzers)
    write_score_tables(records, Path(snakemake.output.tsv), Path(snakemake.output.records))
    print(f"{len(cells)} cells x {len(snakemake.params.analyzers)} analyzers gathered into {snakemake.output.tsv}")
