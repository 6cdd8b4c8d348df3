"""The grades for people and platforms.

`course report`: what a class got wrong (class_summary.py counts, class_report.py writes,
class_report_html.py draws the page); `course gradescope`: the autograder bundle (gradescope.py) and
its results.json (gradescope_results.py); `course feedback`: the course_lib feedback into nbgrader's,
for the hub (hub_feedback.py).

May import: ``intake``, ``grading``, ``records``.
"""
