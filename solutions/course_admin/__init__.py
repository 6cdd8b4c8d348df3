"""Instructor tools: `course release`, `course refs`, `course grade`. Not shipped to learners."""
