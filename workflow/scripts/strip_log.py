"""Write the analyzers' copy of the main log, with every ground-truth line removed."""

import json
from pathlib import Path

from faultloop import layout
from faultloop.faults import strip_markers
from faultloop.workflow import logged

with logged(snakemake.log[0]):
    manifest_path = Path(snakemake.input.manifest)
    manifest = json.loads(manifest_path.read_text())
    main_log = manifest.get("main_log")
    source = manifest_path.parent / main_log if main_log else None
    if source is None or not source.is_file():
        print(f"no main log for this run ({source}); the analyzers get an empty log")
        lines = []
    else:
        with open(source, errors="replace") as handle:
            lines = list(strip_markers(handle))
    layout.write_atomic(snakemake.output.log, "".join(lines))
    print(f"{source}: kept {len(lines)} lines")
