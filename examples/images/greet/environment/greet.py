import os

print(os.environ["GREETING"])
