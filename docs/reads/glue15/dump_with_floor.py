"""`blind_read.py` with another floor for the words a wish word must not be glued into (read 2026-12-03; not shipped).

    python docs/reads/glue15/dump_with_floor.py 15 dump --lengths 5 7 9 11 --precision int8 --out b15.json

The first argument replaces ``prosody.GLUE_MIN_FREQUENCY`` (30) before anything reads it.
"""

import runpy
import sys

import chunlian.prosody as prosody

prosody.GLUE_MIN_FREQUENCY = float(sys.argv.pop(1))
sys.argv[0] = "scripts/blind_read.py"
runpy.run_path("scripts/blind_read.py", run_name="__main__")
