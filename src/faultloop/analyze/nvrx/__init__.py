"""NVRx's own analyzers, run from a user's checkout, as faultloop kinds.

NVIDIA's nvidia-resiliency-ext (NVRx) is not on the package index in a version with its
`attribution/` package, and its code is never copied here: users point faultloop at their checkout
(`nvrx.src`, default the `NVRX_SRC` environment variable) and at the interpreter that has its
dependencies (`nvrx.python`, default `NVRX_PYTHON`, else the project's).

- this module: the kinds' names and NVRx's module names (it imports nothing); the kinds
  themselves are `analyze/kinds/nvrx_*.py`, rows of `analyze.registry.TABLE`;
- `tools`: the checkout and endpoint settings, NVRx's command lines, the sanitized dump copies its
  tools read;
- `outputs`: the tables that map what NVRx printed onto a `LogVerdict` (verdict.json) and the rows
  of fr_attribution's table;
- `run`: what the log kinds share (`NvrxLog`: checkout, endpoint, running NVRx's command line on
  the staged log) and fr_attribution run on a dump folder (an `FrVerdict`).
"""

RESTART_AGENT, LOGSAGE, COMBINED, FR = "nvrx_restart_agent", "nvrx_logsage", "nvrx_combined", "nvrx_fr"
LOG_KINDS = (RESTART_AGENT, LOGSAGE, COMBINED)
FR_KINDS = (FR,)
# Kinds that cannot run without an OpenAI-compatible endpoint (the Restart Agent only uses one
# for its optional L1 stage).
NEEDS_ENDPOINT = (LOGSAGE, COMBINED)
PACKAGE = "nvidia_resiliency_ext"
MODULES = {
    RESTART_AGENT: f"{PACKAGE}.attribution.restart_agent.cli",
    LOGSAGE: f"{PACKAGE}.attribution.log_analyzer.nvrx_logsage",
    COMBINED: f"{PACKAGE}.attribution.combined_log_fr.combined_log_fr",
    FR: f"{PACKAGE}.attribution.trace_analyzer.fr_attribution",
}
DUMP_PATTERN = "_dump_*"
SRC_ENV, PYTHON_ENV = "NVRX_SRC", "NVRX_PYTHON"
KEY_FILE_ENV = "LLM_API_KEY_FILE"  # how NVRx's analyzers find their key (never the key itself)
RESTART_AGENT_SCHEMA = "restart_agent_response.v1"
