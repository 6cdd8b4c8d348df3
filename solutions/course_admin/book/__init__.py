"""The book's own code: its Sphinx extensions (named in _config.yml) and the built book checked in a browser.

The execution cache tied to the course's sources (course_sources.py), launch buttons and two fixes to the
theme's scripts (launch_buttons.py), the CJK font of pages and figures (cjk_font.py), the course's Chinese term
list (terms.py),
what a reader's browser shows of every page (browser_check.py) and what axe-core finds inaccessible in it
(a11y_check.py), both used by solutions/tests/book/; and the Chinese edition: its catalogs checked against
the English (catalogs.py), both editions built (editions.py), each page linked to its twin (language.py).

May import: ``course_lib.provided`` only.
"""
