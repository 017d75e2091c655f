# The showcase's run: a tiny character-level GPT on CPU, one process or torchrun with 2 ranks (gloo).
# A nanoGPT config file (configurator.py execs it; the command line may still override any key).
# gradient_accumulation_steps is the global count: nanoGPT divides it by the world size (4 -> 2 per
# rank at world 2), so both runs train the same global batch of 4 x 4 rows of 32 characters.
dataset = 'showcase_char'  # data/showcase_char/, written by prepare.py
device = 'cpu'
backend = 'gloo'
compile = False
dtype = 'float32'

n_layer = 2
n_head = 2
n_embd = 32
block_size = 32
bias = False
dropout = 0.0

batch_size = 4
gradient_accumulation_steps = 4
max_iters = 15  # nanoGPT trains iterations 0..max_iters: 16 optimizer steps
eval_interval = 5  # evaluates (rank 0 only) before iterations 0, 5, 10, 15
eval_iters = 2
always_save_checkpoint = False

learning_rate = 1e-3
warmup_iters = 2
lr_decay_iters = 15
min_lr = 1e-4
weight_decay = 1e-1
grad_clip = 1.0
