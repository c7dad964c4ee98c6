"""HTTP API and page: one process, one warmed engine (``app.create_app``, ``app.serve``).

The modules, by concern: ``schemas`` (what the API takes and gives), ``errors`` (every refusal in one body),
``guard`` (the outer middleware), ``health`` (probes and metrics), ``api`` (the couplets and writing together),
``prints`` (PNG, PDF, share link and QR) and ``page`` (the gate, its files, a shared couplet's page).
"""

from chunlian.server.app import create_app, serve
from chunlian.server.errors import INTERNAL, WELL_FORMED_REFUSALS
from chunlian.server.guard import CSP, DOCS_CSP
from chunlian.server.prints import MAX_RENDERS
from chunlian.server.schemas import HORIZONTAL_PATTERN, KEYWORD_PATTERN, LINE_PATTERN, shape_answer

__all__ = [
    "CSP",
    "DOCS_CSP",
    "HORIZONTAL_PATTERN",
    "INTERNAL",
    "KEYWORD_PATTERN",
    "LINE_PATTERN",
    "MAX_RENDERS",
    "WELL_FORMED_REFUSALS",
    "create_app",
    "serve",
    "shape_answer",
]
