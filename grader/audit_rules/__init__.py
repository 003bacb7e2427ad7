"""The static audit's rules per language, one module each: `SUFFIXES` (the file endings it
reads) and `RULES` (rule name -> patterns over one added line); grader/audit.py applies them."""
