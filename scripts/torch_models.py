"""PyTorch twins of sdp-train's models (same layers, same shapes, same parameter counts),
used by the benchmark scripts as the peer implementation."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def mlp(in_features=784, hidden=(512, 512), num_classes=10):
    layers, width = [nn.Flatten()], in_features
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, num_classes))
    return nn.Sequential(*layers)


def lenet5(in_channels=1, num_classes=10):
    return nn.Sequential(
        nn.Conv2d(in_channels, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, num_classes))


class CifarBasicBlock(nn.Module):
    """He et al. 2016 CIFAR block with option A shortcuts (subsample + zero-pad channels)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.pad = cout - cin
        self.stride = stride

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        shortcut = x
        if self.stride != 1 or self.pad:
            shortcut = x[:, :, ::self.stride, ::self.stride]
            shortcut = F.pad(shortcut, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
        return F.relu(out + shortcut)


def resnet_cifar(depth=20, num_classes=10):
    n = (depth - 2) // 6
    layers = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        for i in range(n):
            layers.append(CifarBasicBlock(cin, cout, stride if i == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes)]
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    """torchvision's ResNet-18/34 block (1x1 conv + BN projection shortcut)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


def resnet18(in_channels=3, num_classes=10):
    layers = [nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for i in range(2):
            layers.append(BasicBlock(cin, cout, stride if i == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, num_classes)]
    return nn.Sequential(*layers)


def build(name, shape, num_classes=10):
    c, h, w = shape
    if name == "mlp":
        return mlp(c * h * w, num_classes=num_classes)
    if name == "lenet5":
        return lenet5(c, num_classes)
    if name.startswith("resnet") and int(name[6:]) in (20, 32, 44, 56, 110):
        return resnet_cifar(int(name[6:]), num_classes)
    if name == "resnet18":
        return resnet18(c, num_classes)
    if name == "resnet50":  # ImageNet's: torchvision's definition (sdp-train's models/ follows it)
        import torchvision
        return torchvision.models.resnet50(num_classes=num_classes)
    raise ValueError(f"no PyTorch twin for {name}")


def forward_flops(model, shape):
    """Multiply-adds x 2 of conv and linear layers for one image (training ~ 3x this)."""
    flops = [0]

    def conv_hook(m, inp, out):
        flops[0] += 2 * out.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]

    def linear_hook(m, inp, out):
        flops[0] += 2 * m.in_features * m.out_features

    hooks = []
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            hooks.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, nn.Linear):
            hooks.append(m.register_forward_hook(linear_hook))
    with torch.no_grad():
        model.eval()
        model(torch.zeros(1, *shape))
        model.train()
    for h in hooks:
        h.remove()
    return flops[0]
