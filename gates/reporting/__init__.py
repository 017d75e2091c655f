"""gates.reporting: the verdict as people and machines read it: the table, reports/gates.json, the HTML page, JUnit XML, Markdown, and the diff of two reports."""
