"""Publishing the book: the site that GitHub Pages serves, assembled from a build (site.py), and the book's
settings for the repository it is published from (bookconfig.py), and a PDF of each edition printed from the built
site (pdf.py, `make pdf`); all run by .github/workflows/publish.yml.

May import: nothing of course_admin (site.py and bookconfig.py: the standard library only, as the workflow runs them
before the course is installed; pdf.py runs after `make install`, with Playwright and pypdf).
"""
