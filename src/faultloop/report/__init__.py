"""The session report: its model, rendering (markdown, HTML, heatmap, JUnit) and history."""
