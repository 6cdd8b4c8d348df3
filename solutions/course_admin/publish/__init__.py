"""Publishing the book: the site that GitHub Pages serves, assembled from a build (site.py), and the book's
settings for the repository it is published from (bookconfig.py), a PDF of each edition printed from the built
site (pdf.py, `make pdf`), and the learners' course folder zipped beside it, what a chapter's exercise button
installs (learner.py); all run by .github/workflows/publish.yml.

May import: ``book`` (pdf.py: the browser the book's checks find, and its flags; pdf.py runs after `make install`, with
Playwright and pypdf). site.py, bookconfig.py and learner.py: the standard library only, as the workflow runs the
first two before the course is installed; learner.py runs the release tool as a command.
"""
