"""`talaria trajectories compare`: two or more batch runs of the same tasks, paired by task.

    outcomes.py  a run as the comparison reads it (checked attempts per task, streamed)
    paired.py    McNemar's test and the paired bootstrap (standard library only)
    build.py     the comparison (compare.json's layout, how outcomes are paired)
    page.py      the HTML page (charts.py's SVG)
    command.py   compare(sources, output, ...) -> the two files written

May import the trajectories' readers and pages (lines, view, charts); never the batch runner
or the agent's live path.
"""
