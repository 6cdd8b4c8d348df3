"""Helpers provided by the course: loader, checks, command line. Learners use them, never edit them."""
