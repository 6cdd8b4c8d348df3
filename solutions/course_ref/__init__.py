"""Reference implementation of course_lib (instructors only). Loaded by course_lib.provided.loader."""
