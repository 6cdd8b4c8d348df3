"""Publishing the book: the site that GitHub Pages serves, assembled from a build (site.py), and the book's
settings for the repository it is published from (bookconfig.py); both run by .github/workflows/publish.yml.

May import: nothing of course_admin (the standard library only: the workflow runs it before the course is installed).
"""
