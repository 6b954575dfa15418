"""A model's group moves together or not at all (issue 8), across DM201, DM202 and DM203.

Each case is a shape the real-repository trials found: every rule on, the whole rewrite
checked. Each test fails on the engine before the group analysis.
"""

from __future__ import annotations

import textwrap

from all_rules_support import run


def test_held_out_slices_of_a_dataset_move_with_the_model():
    out, reports = run("""\
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset
        data = TensorDataset(torch.randn(64, 3), torch.randint(0, 2, (64,)))
        held_x = data.tensors[0][:8]
        held_y = data.tensors[1][:8]
        net = nn.Linear(3, 2)
        for x, y in DataLoader(data, batch_size=8):
            nn.functional.cross_entropy(net(x), y).backward()
        print((net(held_x).argmax(1) == held_y).float().mean())
    """)
    assert "held_x = data.tensors[0][:8].to(device)" in out
    assert "held_y = data.tensors[1][:8].to(device)" in out
    assert "net = nn.Linear(3, 2).to(device)" in out
    assert not reports


def test_held_out_data_needed_on_the_cpu_keeps_the_whole_group_and_reports_it():
    out, reports = run("""\
        import matplotlib.pyplot as plt
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset
        data = TensorDataset(torch.randn(64, 3), torch.randn(64, 1))
        held = data.tensors[0][:8]
        net = nn.Linear(3, 1)
        for x, y in DataLoader(data, batch_size=8):
            nn.functional.mse_loss(net(x), y).backward()
        noise = torch.randn(8, 3)
        print(net(held + noise))
        plt.plot(held[:, 0])
    """)
    assert ".to(" not in out and "device" not in out, "nothing in the group moves"
    assert [r.code for r in reports] == ["DM202"]
    assert "`held` (line 6) may move to the device: it is also used at line 12" in reports[0].message


def test_a_factory_tensor_also_read_with_numpy_moves_with_the_model():
    out, _ = run("""\
        import torch
        from torch import nn
        x_train = torch.tensor([[1.0], [2.0]])
        model = nn.Linear(1, 1)
        for _ in range(2):
            inputs = x_train
            model(inputs).sum().backward()
        print(model(x_train).detach().numpy(), x_train.numpy())
    """)
    assert "x_train = torch.tensor([[1.0], [2.0]], device=device)" in out
    assert "x_train.cpu().numpy()" in out


def test_tuple_of_host_tensors_moves_on_the_next_line():
    out, _ = run("""\
        import torch
        from torch import nn

        def make_batch():
            return torch.FloatTensor([[1.0, 0.0]]), torch.LongTensor([1])

        if __name__ == "__main__":
            net = nn.Linear(2, 2)
            inputs, targets = make_batch()
            nn.CrossEntropyLoss()(net(inputs), targets).backward()
    """)
    assert "    inputs, targets = make_batch()\n    inputs, targets = inputs.to(device), targets.to(device)\n" in out


def test_lengths_for_pack_padded_sequence_stay_on_the_cpu():
    out, _ = run("""\
        import torch
        from torch import nn

        class Reader(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.GRU(1, 2, batch_first=True)

            def forward(self, x, lengths):
                return self.rnn(nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True))

        def predict(values, model, device):
            x = torch.FloatTensor(values).view(1, -1, 1).to(device)
            lengths = torch.LongTensor([len(values)])
            return model(x, lengths)
    """)
    assert "lengths = torch.LongTensor([len(values)])\n" in out


def test_a_cpu_accumulator_joined_with_cpu_parts_is_left_alone():
    out, _ = run("""\
        import torch
        from torch import nn

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(5, 2)

            def forward(self, x, words):
                feats = torch.FloatTensor()
                for w in words:
                    feats = torch.cat((feats, self.emb(x).cpu().data), 0)
                return feats.to(x.device)
    """)
    assert "feats = torch.FloatTensor()\n" in out


def test_a_script_without_a_model_or_loss_gets_no_device():
    source = """\
        import torch
        m = torch.FloatTensor([[2, 3]]).requires_grad_()
        n = torch.zeros(1, 2)
        n[0, 0] = m[0, 0] ** 2
        n.backward(torch.FloatTensor([[1, 1]]))
    """
    out, _ = run(source)
    assert out == textwrap.dedent(source)


def test_inputs_of_a_model_handed_in_unmoved_stay_with_it():
    out, _ = run("""\
        import torch
        from torch import nn

        def sample(model, n):
            return model(torch.ones(n, 3))

        if __name__ == "__main__":
            print(sample(nn.Linear(3, 2), 2))
    """)
    assert "torch.ones(n, 3))" in out


def test_a_device_flag_is_the_users_choice():
    source = """\
        import argparse
        import torch

        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--cuda", action="store_true")
            args = parser.parse_args()
            net = torch.load("net.pt")
            x = torch.randn(2, 3)
            if args.cuda:
                x = x.cuda()
            print(net(x))
    """
    out, _ = run(source)
    assert "map_location=device" not in out and "device =" not in out, "no second, global device"



def test_models_shared_between_processes_stay_on_the_cpu():
    # Hogwild: workers forked by torch.multiprocessing train a model in CPU shared memory and
    # pair their local copy's gradients with its parameters. Moving either model breaks that
    # (a forked worker cannot use CUDA; CPU parameters cannot take CUDA gradients).
    source = """\
        import torch
        import torch.multiprocessing as mp
        import torch.nn as nn

        def train(shared, rank):
            local = nn.Linear(4, 1)
            local.load_state_dict(shared.state_dict())
            local(torch.randn(8, 4)).sum().backward()
            for p, q in zip(shared.parameters(), local.parameters()):
                p._grad = q.grad

        if __name__ == "__main__":
            model = nn.Linear(4, 1)
            model.share_memory()
            workers = [mp.Process(target=train, args=(model, r)) for r in range(2)]
            print(model(torch.randn(2, 4)))
    """
    out, reports = run(source)
    assert out == textwrap.dedent(source)
    assert not reports

def test_the_comment_above_a_removed_variable_import_is_kept():
    out, _ = run("""\
        import torch
        # autograd wrapper, needed for torch 0.3
        from torch.autograd import Variable
        w = Variable(torch.ones(2), requires_grad=True)
    """)
    assert "from torch.autograd import Variable" not in out
    assert "# autograd wrapper, needed for torch 0.3\n" in out


def test_a_target_reached_through_an_alias_moves_with_the_model():
    out, _ = run("""\
        import torch
        from torch import nn
        x_train = torch.tensor([[1.0], [2.0]])
        y_train = torch.tensor([[2.0], [4.0]])
        model = nn.Linear(1, 1)
        criterion = nn.MSELoss()
        for _ in range(2):
            inputs = x_train
            target = y_train
            criterion(model(inputs), target).backward()
        print(x_train.numpy(), y_train.numpy())
    """)
    assert "model = nn.Linear(1, 1).to(device)" in out
    assert "y_train = torch.tensor([[2.0], [4.0]], device=device)" in out or "target = y_train.to(device)" in out


def test_a_model_inside_a_wrapper_that_stays_stays_too():
    out, reports = run("""\
        import matplotlib.pyplot as plt
        import torch
        from torch import nn

        class Wrapper(nn.Module):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def forward(self, ids):
                return self.net(ids).sum()

        if __name__ == "__main__":
            inner = nn.Embedding(30, 8)
            wrapper = Wrapper(inner)
            ids = torch.tensor([[1, 2, 3]]).long()
            print(wrapper(ids))
            plt.plot(ids[0])
    """)
    assert ".to(" not in out
    assert any("wrapper" in r.message for r in reports)


def test_held_out_data_through_a_torch_function_and_a_cast_moves():
    out, _ = run("""\
        import torch
        import torchvision
        test_data = torchvision.datasets.MNIST(root="./mnist", train=False)
        test_x = torch.unsqueeze(test_data.data, dim=1).type(torch.FloatTensor)[:20] / 255.
        net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10))
        print(net(test_x).argmax(1))
    """)
    assert "test_x = (torch.unsqueeze(test_data.data, dim=1).type(torch.FloatTensor)[:20] / 255.).to(device)" in out


def test_names_rebound_from_a_tuple_of_their_own_conversions_move():
    out, _ = run("""\
        import torch
        x = torch.cat((torch.ones(4, 2), torch.zeros(4, 2))).type(torch.FloatTensor)
        y = torch.cat((torch.ones(4), torch.zeros(4))).type(torch.LongTensor)
        x, y = x.detach(), y.detach()
        net = torch.nn.Linear(2, 2)
        print(torch.nn.functional.cross_entropy(net(x), y))
    """)
    assert "x, y = x.detach(), y.detach()\nx, y = x.to(device), y.to(device)\n" in out


def test_two_models_trained_on_the_same_data_move_together():
    out, reports = run("""\
        import torch
        x = torch.unsqueeze(torch.linspace(-1, 1, 20), 1)
        y = x + 0.3 * torch.normal(torch.zeros(20, 1), torch.ones(20, 1))
        wide = torch.nn.Sequential(torch.nn.Linear(1, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
        thin = torch.nn.Sequential(torch.nn.Linear(1, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
        loss_func = torch.nn.MSELoss()
        for step in range(3):
            loss_wide = loss_func(wide(x), y)
            loss_thin = loss_func(thin(x), y)
        print(y.numpy().mean())
    """)
    assert "x = torch.unsqueeze(torch.linspace(-1, 1, 20, device=device), 1)" in out
    assert "torch.normal(torch.zeros(20, 1, device=device), torch.ones(20, 1, device=device))" in out
    assert ".to(device)\n" in out.split("wide = ", 1)[1].split("\n", 1)[0] + "\n"
    assert "print(y.cpu().numpy().mean())" in out
    assert "(x * " not in out and not reports


def test_normalised_host_data_moves_once_and_factories_are_left_to_dm201():
    out, reports = run("""\
        import torch
        from torch import nn
        x = (torch.rand(20) - 0.5) * 12
        y = x * torch.sin(x)
        rows = torch.Tensor([[k, k + 1] for k in range(4)])
        rows = (rows - rows.mean(0)) / rows.std(0)
        net = nn.Linear(1, 1)
        pair = nn.Linear(2, 1)
        print(net(x.unsqueeze(1)) - y.unsqueeze(1), pair(rows))
    """)
    assert "y = x * torch.sin(x)\n" in out, "y follows x, which DM201 places: no second move"
    assert "rows = ((rows - rows.mean(0)) / rows.std(0)).to(device)" in out
    assert not reports


def test_inputs_from_an_image_transform_or_a_tokenizer_keep_the_model_where_it_is():
    source = """\
        import torch.nn as nn
        from PIL import Image
        from torchvision import transforms
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained("tiny")
        encoder = nn.Linear(4, 4)
        print(encoder(**tokenizer(["a b"], return_tensors="pt")))
        preprocess = transforms.Compose([transforms.ToTensor()])
        net = nn.Conv2d(3, 8, 3)
        print(net(preprocess(Image.new("RGB", (8, 8))).unsqueeze(0)))
    """
    out, reports = run(source)
    assert out == textwrap.dedent(source)
    messages = [r.message for r in reports if r.code == "DM202"]
    assert len(messages) == 2
    assert "its input at line 8 comes from transformers" in messages[0]
    assert "its input at line 11 comes from torchvision.transforms" in messages[1]


def test_a_model_fed_rows_of_host_tensors_in_a_zip_loop_moves_with_them():
    out, reports = run("""\
        import torch
        import torch.nn as nn
        rows = torch.Tensor([[0.0, 1.0], [1.0, 0.0]])
        labels = torch.LongTensor([1, 0])
        net = nn.Linear(2, 2)
        for row, label in zip(rows, labels):
            print(net(row.unsqueeze(0)).argmax(1) == label)
    """)
    assert "rows = torch.Tensor([[0.0, 1.0], [1.0, 0.0]]).to(device)" in out
    assert "labels = torch.LongTensor([1, 0]).to(device)" in out
    assert "net = nn.Linear(2, 2).to(device)" in out and not reports


def test_a_factory_that_meets_a_legacy_tensor_bound_to_a_name_stays():
    source = """\
        import torch
        m = torch.Tensor([[2, 5, 3, 7], [4, 2, 1, 9]])
        v = torch.arange(1., 4 + 1)
        print(m @ v)
        print(m + torch.rand(2, 4))
        device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    """
    out, reports = run(source)
    assert out == textwrap.dedent(source)


def test_a_replay_buffer_batch_and_a_method_input_move_with_the_policy():
    out, reports = run('''\
        import numpy as np
        import torch
        import torch.nn as nn

        class Buffer:
            def __init__(self):
                self.items = []

            def sample(self):
                states, actions = zip(*self.items)
                return torch.tensor(np.stack(states), dtype=torch.float), torch.tensor(actions)

        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                return self.fc(x)

            def act(self, obs):
                return self.forward(obs).argmax().item()

        def learn(net, memory):
            s, a = memory.sample()
            return net(s).gather(1, a.unsqueeze(1)).sum()

        def main():
            policy = Policy()
            memory = Buffer()
            for step in range(4):
                obs = np.ones(4, dtype=np.float32)
                memory.items.append((obs, policy.act(torch.from_numpy(obs))))
            print(learn(policy, memory))

        if __name__ == "__main__":
            main()
    ''')
    assert "    s, a = memory.sample()\n    s, a = s.to(device), a.to(device)\n" in out
    assert "policy = Policy().to(device)" in out
    assert "policy.act(torch.from_numpy(obs).to(device))" in out
    assert not reports
    namespace = {"__name__": "__main__"}
    exec(compile(out, "rl.py", "exec"), namespace)  # runs on the CPU as before


def test_rows_rebound_inside_the_loop_still_come_from_the_sequence():
    out, reports = run("""\
        import torch
        import torch.nn as nn
        cell = nn.RNN(input_size=4, hidden_size=2, batch_first=True)
        hidden = torch.randn(1, 1, 2)
        rows = torch.Tensor([[1, 0, 0, 0], [0, 1, 0, 0]])
        for one in rows:
            one = one.view(1, 1, -1)
            out, hidden = cell(one, hidden)
        print(out.shape)
    """)
    assert "rows = torch.Tensor([[1, 0, 0, 0], [0, 1, 0, 0]]).to(device)" in out
    assert "cell = nn.RNN(input_size=4, hidden_size=2, batch_first=True).to(device)" in out
    assert not reports


def test_inputs_fed_to_the_models_own_methods_move_with_it():
    # An actor-critic fed through ``model.pi(s)`` and ``model.v(s)``: both are the model's own
    # forward paths, so ``s`` moves with it instead of the group being reported.
    out, reports = run("""\
        import numpy as np
        import torch
        import torch.nn as nn

        class ActorCritic(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(4, 2)
                self.c = nn.Linear(4, 1)

            def pi(self, x):
                return self.a(x).softmax(-1)

            def v(self, x):
                return self.c(x)

        def main():
            model = ActorCritic()
            s = torch.from_numpy(np.ones((3, 4), dtype=np.float32))
            ret = torch.from_numpy(np.ones((3, 1), dtype=np.float32))
            adv = ret - model.v(s)
            print((model.pi(s)[:, :1] * adv).sum())

        if __name__ == "__main__":
            main()
    """)
    assert "s = torch.from_numpy(np.ones((3, 4), dtype=np.float32)).to(device)" in out
    assert "ret = torch.from_numpy(np.ones((3, 1), dtype=np.float32)).to(device)" in out
    assert "model = ActorCritic().to(device)" in out
    assert not reports


def test_an_input_built_where_a_handed_model_runs_a_method_moves_there():
    # ``evaluate(0, model)`` runs ``net.pi(...)``: the function works with the device, so the
    # input it builds inline moves with the model instead of being left on the CPU.
    out, reports = run("""\
        import numpy as np
        import torch
        import torch.nn as nn

        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def pi(self, x):
                return self.fc(x).softmax(-1)

        def evaluate(step, net):
            return net.pi(torch.from_numpy(np.ones(4, dtype=np.float32))).argmax().item()

        if __name__ == "__main__":
            model = Policy()
            print(model.pi(torch.from_numpy(np.ones((3, 4), dtype=np.float32))).sum())
            print(evaluate(0, model))
    """)
    assert "net.pi(torch.from_numpy(np.ones(4, dtype=np.float32)).to(device))" in out
    assert "model = Policy().to(device)" in out
    assert not reports


def test_a_model_filled_by_add_module_stays_with_its_input_and_is_reported():
    out, reports = run("""\
        import torch
        import torch.nn as nn

        net = nn.Sequential()
        net.add_module("first", nn.Linear(4, 8))
        net.add_module("second", nn.Linear(8, 2))
        x = torch.randn(2, 4)
        print(net(x).shape)
    """)
    assert "device" not in out, "neither the empty Sequential nor its input moves"
    assert len(reports) == 1 and "net.add_module(...)" in reports[0].message


def test_writing_into_a_parts_weights_is_not_a_new_part():
    out, reports = run("""\
        import torch
        import torch.nn as nn

        m = nn.Sequential(nn.Linear(5, 5, bias=False))
        m[0].weight.data[0][0] = 42
        print(m(torch.randn(2, 5)))
    """)
    assert "m = nn.Sequential(nn.Linear(5, 5, bias=False)).to(device)" in out
    assert not reports


def test_a_model_fed_by_a_function_computing_with_a_cpu_global_stays_and_is_reported():
    out, reports = run("""\
        import torch
        from torch.distributions import Normal

        W = Normal(0, 0.01).sample((4, 3))

        def affine(X):
            print(len(X))
            return torch.matmul(X, W)

        head = torch.nn.Linear(3, 1)
        print(head(affine(torch.rand(2, 4))))
    """)
    assert "device" not in out
    assert len(reports) == 1 and "computed with `W` (line 4)" in reports[0].message


def test_a_name_rebound_to_a_model_filled_later_keeps_the_first_models_group_apart():
    out, reports = run("""\
        import torch
        from torch import nn

        net = nn.Sequential(nn.Linear(20, 8), nn.ReLU())
        print(net(torch.randn(2, 20)).shape)

        net = nn.Sequential()
        net.add_module("lin", nn.Linear(20, 2))
        print(net(torch.randn(3, 20)).shape)

        def body():
            blk = []
            blk.append(nn.Linear(4, 4))
            blk = nn.Sequential(*blk)
            return blk

        print(body()(torch.ones(1, 4)).shape)
    """)
    assert "net = nn.Sequential(nn.Linear(20, 8), nn.ReLU()).to(device)" in out
    assert "print(net(torch.randn(3, 20)).shape)" in out, "the second net stays, and so does its input"
    assert "blk = nn.Sequential(*blk)\n" in out and "torch.ones(1, 4))" in out
    assert [r.line for r in reports] == [7]  # the user's line (`net = nn.Sequential()`)


def test_a_nested_functions_own_variable_is_not_a_use_of_the_global():
    source = """\
        import torch
        import torch.nn as nn

        net = nn.Sequential(nn.Linear(8, 2))
        X = torch.randn(1, 8)
        print(net(X))

        def try_gpu():
            return torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")

        device = try_gpu()

        def train(net, batches, device):
            for X, y in batches:
                X = X.to(device)
                print(net(X), y)
    """
    out, reports = run(source)
    assert not reports


def test_a_subclass_of_sequential_is_a_model_and_its_input_stays_with_it():
    out, reports = run("""\
        import torch
        from torch import nn

        class Stack(nn.Sequential):
            def add_module(self, block):
                self._modules[str(len(self._modules))] = block

        net = Stack()
        net.add_module(nn.Linear(20, 8))
        x = torch.randn(2, 20)
        print(net(x).shape)
    """)
    assert "x = torch.randn(2, 20)\n" in out
    assert len(reports) == 1 and "gets new parts" in reports[0].message
