"""Tests of course_admin/book/ and book/_code/: the book's extensions, the built book in a browser, beam search."""
