"""The records that cross a process edge, each with one reader, one writer and one validator:

- `Manifest` (job.json, `manifest`): what run_job records about one cell's job, the only input
  about the run that scoring trusts;
- `LogVerdict` (verdict.json) and `FrVerdict` (fr.json), what every log and flight-recorder
  analyzer answers whatever its kind, and `RunRecord` (run.json, the analysis indexes), how an
  answer came about (`verdicts`);
- `ScoreRecord` (score.json, a scores.tsv row, a scores.jsonl line; `scores`);
- the grades and the one table of score dimensions every list of dimensions is selected from
  (`grades`).
"""

from faultloop.contracts.grades import (
    DIMENSIONS,
    FR_RANK,
    UPSTREAM_CELL_COLUMNS,
    UPSTREAM_NOTES_COLUMN,
    Dimension,
    DimensionTable,
    Grade,
    Reads,
    upstream_table_columns,
)
from faultloop.contracts.manifest import ADOPTED_WORKLOAD, STATES, Manifest, ManifestError, RankExit
from faultloop.contracts.scores import (
    FR_PREFIX,
    INFRA_FAILURE,
    INVALID,
    NOT_RUN,
    RENAMED,
    SCORED,
    CellEvidence,
    CitedLine,
    EvidenceLine,
    FileLink,
    LifeStep,
    ScoreRecord,
    read_cell_scores,
    read_score_records,
    read_score_tsv,
    score_tsv_text,
    tsv_columns,
    write_cell_scores,
    write_score_tables,
)
from faultloop.contracts.verdicts import (
    FAILED,
    OK,
    CitesLine,
    FrVerdict,
    LogVerdict,
    NodeRef,
    RecordError,
    RunRecord,
    SkippedFile,
    VerdictLine,
    node_name,
    read_index,
    short_host,
    write_index,
)

__all__ = [
    "ADOPTED_WORKLOAD",
    "DIMENSIONS",
    "FAILED",
    "FR_PREFIX",
    "FR_RANK",
    "INFRA_FAILURE",
    "INVALID",
    "NOT_RUN",
    "OK",
    "RENAMED",
    "SCORED",
    "STATES",
    "UPSTREAM_CELL_COLUMNS",
    "UPSTREAM_NOTES_COLUMN",
    "CellEvidence",
    "CitedLine",
    "CitesLine",
    "Dimension",
    "DimensionTable",
    "EvidenceLine",
    "FileLink",
    "FrVerdict",
    "Grade",
    "LifeStep",
    "LogVerdict",
    "Manifest",
    "ManifestError",
    "NodeRef",
    "RankExit",
    "Reads",
    "RecordError",
    "RunRecord",
    "ScoreRecord",
    "SkippedFile",
    "VerdictLine",
    "node_name",
    "read_cell_scores",
    "read_index",
    "read_score_records",
    "read_score_tsv",
    "score_tsv_text",
    "short_host",
    "tsv_columns",
    "upstream_table_columns",
    "write_cell_scores",
    "write_index",
    "write_score_tables",
]
