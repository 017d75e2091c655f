"""gates.campaigns: measuring the gates: the mutation campaign (a catalogue of training-stack bugs) and bisect over commits."""
