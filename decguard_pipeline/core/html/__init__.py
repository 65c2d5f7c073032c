"""Self-contained HTML pages of reports: markup that escapes every data string, inline SVG
charts, and data tables that a small inline script filters and pages in the browser.

Nothing here reaches the network: the CSS and the script are package files inlined into the
page, and the page's Content-Security-Policy forbids every fetch, so a page opened from disk
shows exactly what it holds. Feature pages live with their feature (``core.report.html``,
``core.diff.html``)."""
