"""The cluster's access state, owned durably by the controller and carried to every broker in
UpdateMetadata (KRaft's AclControlManager and ScramControlManager).

* :mod:`acls` -- AclManager: CreateAcls / DeleteAcls, the controller's own authorizer.
* :mod:`scram_users` -- ScramUserManager: AlterUserScramCredentials.
"""
