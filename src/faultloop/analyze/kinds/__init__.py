"""One module per kind of analyzer, each implementing `analyze.analyzer.Kind` and exporting it as
`KIND` (a row of `analyze.registry.TABLE`):

  faultloop_log        faultloop's logsage (kind faultloop)
  llm                  logsage's LLM mode
  nvrx_logsage_package NVRx's nvrx_logsage from its pip package
  command              any executable (faultloop JSON or upstream's five-part text)
  torchrun_root_cause  baseline: the launcher's own root cause
  first_error          baseline: the first error-looking line
  nvrx_restart_agent, nvrx_logsage, nvrx_combined   NVRx's log analyzers from a checkout
  faultloop_fr         faultloop's flight-recorder analyzer
  torchfrtrace         torch's fr_trace on sanitized dump copies
  nvrx_fr              NVRx's fr_attribution from a checkout
  combined             faultloop's merge of the primary log and first FR verdicts
"""
