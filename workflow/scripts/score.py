"""score rule: gather every pool cell's score.json into the session's scores.tsv."""

from pathlib import Path

from faultloop.plan.invocation import logged
from faultloop.plan.pool import Cell
from faultloop.score import cells as score

with logged(snakemake.log[0]):
    session = Path(snakemake.params.session)
    cells = [Cell.from_name(name) for name in snakemake.params.cells]
    records = score.gather(session, cells, snakemake.params.analyzers)
    score.write_tables(records, Path(snakemake.output.tsv), Path(snakemake.output.records))
    print(f"{len(cells)} cells x {len(snakemake.params.analyzers)} analyzers gathered into {snakemake.output.tsv}")
